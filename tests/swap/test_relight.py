"""Relighting (issue 42, ``advanced.swap.relight``): the swapped face takes the live face's shading
(a lamp to one side), not only its mean colour.

Real faces (t1-0 and t1-1 of insightface's ``t1.jpg``, enlarged to 260 px) under the hard set's
dim side light (``tests.helpers.hard_set.relight``: exposure x0.3, linear gain falling from 1 to
0.4 across the face, on linear sRGB), with the astronaut and t1-2 as sources. The error is the
mean CIEDE2000 between output and input over patches of the cheeks, nose and chin
(``tests.helpers.classic_judge.local_de2000``, scikit-image's colour science). Measured: 5.07
without relighting (the behaviour before), 4.19 with ``advanced.swap.relight: 0.3``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from livecam.config.swap import SwapConfig
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import MeshTopology
from tests.helpers import classic_judge as cj
from tests.helpers.hard_set import HardFace, relight
from tests.helpers.swap_eval import RealFace, enlarged, source_from, swap_pair


def test_relighting_follows_a_side_lamp(by_label: dict[str, RealFace],
                                        topology: MeshTopology) -> None:
    errors: dict[float, list[float]] = {0.0: [], 0.3: []}
    for target_label in ("t1-0", "t1-1"):
        face = enlarged(by_label[target_label], 260.0)
        dim = RealFace(f"{target_label} dim",
                       relight(face.image_bgr, "dim", face.landmarks_xy, noise=False),
                       face.landmarks_xy, face.landmarks_z)
        none = np.zeros(dim.image_bgr.shape[:2], bool)
        target = HardFace(target_label, "dim", dim, none, none, "", dim.image_bgr)
        region = cj.skin_region(target)
        for source_label in ("astronaut", "t1-2"):
            source = source_from(enlarged(by_label[source_label], 260.0), topology)
            for strength, found in errors.items():
                swapper = ClassicFaceSwapper(replace(SwapConfig(), relight=strength), topology)
                out = swap_pair(swapper, source, dim)
                assert (out != dim.image_bgr).any(axis=2)[region].mean() > 0.5  # it swapped
                found.append(cj.local_de2000(out, target, region))
    assert np.mean(errors[0.3]) < 0.9 * np.mean(errors[0.0]), errors

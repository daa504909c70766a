"""Foreign colour (issue 42): the swapped skin shows no colour that neither the live face's
skin nor the source's skin (under the live face's light) has.

Real faces from installed packages, enlarged to 260 px (webcam size), in the hard set's lights
(``tests.helpers.hard_set``: physically made warm light, a skin tone made darker by melanin).
The judge is ``tests.helpers.classic_judge.foreign_share`` (scikit-image's CIE Lab, 4-unit
bins; the target's skin colours and the relit source's, each grown by a bin). The pairs are the
hard set's worst two kinds (``scripts/judge_classic.py``):

- Tom Hanks's greyscale photo in warm light as the live face: its chroma grows with its
  lightness (one chromaticity), but the lab transfer gave every lightness the same mean
  chroma and kept a share of the source's colour detail, so the source's highlights came out
  too grey for their lightness and its red cheeks stayed (Grace Hopper onto him: 25.6 % of the
  skin foreign in the judge).
- A source's highlights brighter than any skin of the live face (t1-2's lit cheek onto t1-4:
  13.4 % in the judge; Hanks's contrasty photo onto the darkened t1-5 in warm light: 15.1 %).
- A live face whose highlights lose colour as they brighten (t1-2 in warm light: the red
  channel saturates, CIE a falls from 33 to 11 between L 56 and 74) under a source's bright
  highlights (Hanks): a and b that only grow with the lightness left them orange where the
  live highlights are pale (16.2 % in the judge, its worst pair).

- A source's highlights on a dark live face (Hanks onto t1-0 made darker): the ceiling's
  margin above the live skin's brightest was the same 20 levels of L on every face
  (5.6 % in the judge).

Measured here before the first fix (``colour.lab_transfer`` as it was): 20.1 %, 9.1 % and
12.8 %; after: 0.01 %, 0.52 % and 0.31 %. Hanks onto t1-2 in warm light: 4.84 % before the
highlights' band (``highlights.HighlightBand``), 0.34 % after. Hanks onto the dark t1-0:
3.3 % before the margin followed the live lightness, 0.19 % after.
"""

from __future__ import annotations

import numpy as np
import pytest

from livecam.config.swap import SwapConfig
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import MeshTopology
from tests.helpers import classic_judge as cj
from tests.helpers.hard_set import HardFace, hopper_face, relight, tone_shift
from tests.helpers.swap_eval import RealFace, enlarged, source_from, swap_pair


def _person(face: RealFace, melanin: float = 0.0) -> HardFace:
    image = tone_shift(face.image_bgr, face.landmarks_xy, melanin)
    toned = RealFace(face.label, image, face.landmarks_xy, face.landmarks_z)
    none = np.zeros(image.shape[:2], bool)
    return HardFace(face.label, "even", toned, none, none, "", image)


def _in_light(person: HardFace, light: str) -> HardFace:
    f = person.face
    image = relight(f.image_bgr, light, f.landmarks_xy, noise=False)
    lit = RealFace(f"{f.label} {light}", image, f.landmarks_xy, f.landmarks_z)
    return HardFace(person.person, light, lit, person.glasses, person.beard, "", image)


@pytest.mark.slow
def test_swapped_skin_has_no_foreign_colour(by_label: dict[str, RealFace],
                                            topology: MeshTopology) -> None:
    people = {"hanks": _person(enlarged(by_label["hanks"], 260.0)),
              "hopper": _person(enlarged(hopper_face(), 260.0)),
              "t1-2": _person(enlarged(by_label["t1-2"], 260.0)),
              "t1-4": _person(enlarged(by_label["t1-4"], 260.0)),
              "t1-0 dark": _person(enlarged(by_label["t1-0"], 260.0), melanin=1.6),
              "t1-5 dark": _person(enlarged(by_label["t1-5"], 260.0), melanin=1.3)}
    swapper = ClassicFaceSwapper(SwapConfig(), topology)
    shares = {}
    for source, target, light in (("hopper", "hanks", "warm"), ("t1-2", "t1-4", "even"),
                                  ("hanks", "t1-5 dark", "warm"), ("hanks", "t1-2", "warm"),
                                  ("hanks", "t1-0 dark", "even")):
        live = _in_light(people[target], light)
        region = cj.skin_region(live)
        out = swap_pair(swapper, source_from(people[source].face, topology), live.face)
        assert (out != live.face.image_bgr).any(axis=2)[region].mean() > 0.5  # it swapped
        colours = cj.skin_colours(cj.skin_bins(live), cj.skin_bins(people[source], light))
        shares[(source, target, light)] = cj.foreign_share(out, region, colours)
    assert max(shares.values()) <= 0.01, shares  # the goal: <= 1 % of the skin

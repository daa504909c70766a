"""Identity transfer judged by an independent recognizer (dlib's 128-d ResNet).

Every ordered pair of 8 real people (56 swaps): the swapped face should be closer to the source
person than to the target person. ``scripts/judge_swap.py`` prints the full table; the goals of
the issue (>= 90 % of pairs, mean distance to the source <= 0.53) are reported there.
"""

from __future__ import annotations

import pytest

from livecam.config.swap import SwapConfig
from livecam.swap.mesh import MeshTopology
from livecam.testing.face_judge import FaceJudge
from livecam.testing.swap_eval import RealFace, judge_pairs, summarise


@pytest.mark.slow
@pytest.mark.parametrize(("blend", "min_closer"), [("feather", 0.88), ("seamless", 0.85)])
def test_swapped_faces_look_like_the_source(faces: list[RealFace], topology: MeshTopology,
                                            blend: str, min_closer: float) -> None:
    results = judge_pairs(SwapConfig(blend=blend), faces, topology, FaceJudge())
    summary = summarise(results)
    assert summary["pairs"] == 56
    assert summary["closer_to_source"] >= min_closer, summary
    assert summary["mean_d_source"] < summary["mean_d_target"] - 0.08, summary
    assert summary["mean_d_source"] < 0.56, summary

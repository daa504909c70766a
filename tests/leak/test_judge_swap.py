"""The leak judge on livecam's own weakest swap: the classic swap of a three-quarter face.

The live leak runs (test_leak_live.py) judge it too, but there it depends on which frames the
load lets through; here it is offline and deterministic, so a change to the swap or to the
judge that closes the gap between them fails here first (docs/fail-closed.md, "Why 0.40").
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.analysis import build_stages
from livecam.config import load_config
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.identity import IdentityCollection, identity_from_photo
from livecam.swap.stage import ClassicSwapStage
from tests.helpers.leak_clips import LeakClip
from tests.helpers.leak_judge import LEAK_RESIDUAL, judge

#: How far above the threshold the weakest swap must stay here. This offline run scores it
#: 0.53 (the outputs skip the live run's x264 encode, which adds to the residual); the live leak
#: runs, which drop and hold frames, scored the same person's three-quarter face down to 0.49
#: (docs/fail-closed.md), 0.04 lower: 0.1 here leaves the live figure 0.06 above the threshold.
SWAP_ROOM = 0.1


@pytest.mark.slow  # a classic swap judged frame by frame (about 30 s on 2 cores)
def test_the_classic_swap_of_a_three_quarter_face_is_not_a_leak(
        clips: dict[str, LeakClip], astronaut_bgr: np.ndarray, tmp_path: Path) -> None:
    """``still_6`` (the t1 photo) swapped with the shipped settings: its three-quarter face is
    the weakest swap (its profile nose and lips stay the streamer's, and by design so do its
    eyes inside the lids and its mouth interior: advanced.swap.keep_eyes, swap.keep_mouth)."""
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)
    config = load_config(None, ["advanced.pipeline.realtime=false"])  # the shipped swap settings
    identities = IdentityCollection({"astro": identity_from_photo(photo, config.identity)})
    state = RuntimeState(active_identity="astro", identities=("astro",))
    frames = list(clips["still_6"].frames())[:16]
    inputs, truths = [f for f, _ in frames], [t for _, t in frames]
    outputs = []
    stray: list[tuple[int, list[int]]] = []  # withheld regions on no face
    analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
    with analysis, ClassicSwapStage(config.swap, identities) as swap:
        for t, image in enumerate(inputs):
            out = swap.process(analysis.process(Packet.from_frame(Frame(t, 0, image), state)))
            stray += [(t, [round(float(v)) for v in box])
                      for box in swap.last_withheld.boxes_xyxy
                      if not _overlaps(box, truths[t].boxes_xyxy)]
            swapped_all = (len(swap.last_withheld) == 0 and len(swap.last_infos) == 6
                           and all(i.swapped and i.fade >= 1.0 and i.kept_eyes
                                   for i in swap.last_infos))
            if swapped_all:  # judge only frames where every face is swapped, none covered
                outputs.append(out.image_bgr)
    # nothing covered where no face is (before: the bottom edge search took t1's glasses on
    # the table for a face entering from below and covered 288x89 px of table every frame)
    assert stray == []
    assert len(outputs) >= 8, "the faces were not swapped (covered or faded) on most frames"
    report = judge(inputs, truths, outputs)
    assert report.faces_judged == 6 * len(outputs)
    assert report.leaks_counted == 0, report.summary()["leaked"]
    weakest = min(report.verdicts, key=lambda v: v.residual)
    assert weakest.residual >= LEAK_RESIDUAL + SWAP_ROOM, (weakest, LEAK_RESIDUAL)


def _overlaps(box: np.ndarray, boxes: np.ndarray) -> bool:
    """Whether ``box`` (x1, y1, x2, y2) shares any area with one of ``boxes`` (n, 4)."""
    if not len(boxes):
        return False
    w = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])
    h = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])
    return bool(np.any((w > 0) & (h > 0)))

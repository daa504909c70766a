"""The direct detector (LiteRT + numpy decoding and weighted NMS) against MediaPipe's graph.

Both run the same BlazeFace ``.tflite`` files from the installed mediapipe, on real photos and
on a frame built from them, whole and tiled: the detections must be the same.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.analysis import litert
from livecam.analysis.detect import BlazeFaceDetector
from livecam.core.types import Faces


def _detect_both(model: str, image: np.ndarray, **kw: int) -> tuple[Faces, Faces]:
    with BlazeFaceDetector(model=model, max_faces=8, **kw) as direct:
        assert direct.runner == "direct"
        ours = direct.detect(image, all_tiles=True)
    with pytest.MonkeyPatch.context() as mp:  # as where LiteRT cannot be imported
        mp.setattr(litert, "litert_interpreter", lambda: None)
        with BlazeFaceDetector(model=model, max_faces=8, **kw) as graph:
            assert graph.runner == "graph"
            theirs = graph.detect(image, all_tiles=True)
    return ours, theirs


@pytest.mark.parametrize("model", ["short", "full", "auto"])
def test_direct_detections_equal_mediapipe_graph(model: str, t1_bgr: np.ndarray,
                                                 astronaut_bgr: np.ndarray) -> None:
    # a wide frame holding six people small enough to need tiles
    frame = np.full((720, 1280, 3), 90, np.uint8)
    small = cv2.resize(t1_bgr, (640, 443), interpolation=cv2.INTER_AREA)
    frame[200:643, 500:1140] = small
    found = 0
    for image in (t1_bgr, astronaut_bgr, frame):
        ours, theirs = _detect_both(model, image)
        assert len(ours) == len(theirs)
        if len(ours) == 0:
            continue
        assert np.abs(ours.boxes_xyxy - theirs.boxes_xyxy).max() < 0.05
        assert np.abs(ours.keypoints_xy - theirs.keypoints_xy).max() < 0.05
        assert np.abs(ours.scores - theirs.scores).max() < 1e-4
        found += len(ours)
    assert found >= 5

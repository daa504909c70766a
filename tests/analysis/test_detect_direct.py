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


@pytest.mark.parametrize("model", ["short", "full"])
def test_detect_bgr_equals_detect_on_the_rgb_picture(model: str, t1_bgr: np.ndarray,
                                                     astronaut_bgr: np.ndarray) -> None:
    # the detector turns only the network's input to RGB, not the frame: the warp treats
    # each channel alike, so the detections are the same to the last bit
    from livecam.analysis.blazeface_lite import DirectBlazeFace

    runner = DirectBlazeFace(model, min_score=0.3)
    found = 0
    for image in (t1_bgr, astronaut_bgr, np.ascontiguousarray(t1_bgr[100:, :700])):
        ours = runner.detect_bgr(image)
        theirs = runner.detect(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
        assert len(ours) == len(theirs)
        for (box, score, kps), (box2, score2, kps2) in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(box, box2)
            np.testing.assert_array_equal(kps, kps2)
            assert score == score2
        found += len(ours)
    assert found >= 3


@pytest.mark.parametrize("model", ["full", "auto"])
def test_edge_strips_sampled_from_the_frame_equal_built_pictures(model: str,
                                                                 t1_bgr: np.ndarray) -> None:
    # the CPU networks' detect_strips samples each strip straight from the frame: the same
    # detections as the detector on the strip pictures edge_strips builds (mirrors, repeated
    # rows), on frames whose faces sit across the strips' edges and mirror lines
    from livecam.analysis import edges
    from livecam.analysis.networks import CpuFaceNetworks

    frames = [cv2.resize(t1_bgr, (1280, 720)), np.ascontiguousarray(t1_bgr[:, :900]),
              np.ascontiguousarray(t1_bgr[300:, 200:])]
    nets = CpuFaceNetworks(detector_model=model)
    nets.open()
    found = 0
    try:
        for frame in frames:
            places = edges.strip_places(*frame.shape[:2])
            sampled = nets.detect_strips(frame, places)
            assert sampled is not None
            built = [nets.detect(strip.image_bgr) for strip in edges.edge_strips(frame)]
            assert len(sampled) == len(built) == len(places)
            for ours, theirs in zip(sampled, built, strict=True):
                assert len(ours) == len(theirs)
                found += len(ours)
                np.testing.assert_allclose(ours.scores, theirs.scores, atol=0.01)
                np.testing.assert_allclose(ours.boxes_xyxy, theirs.boxes_xyxy, atol=1.0)
                np.testing.assert_allclose(ours.keypoints_xy, theirs.keypoints_xy, atol=1.0)
    finally:
        nets.close()
    assert found >= 10


def test_detect_strips_leaves_pictures_it_cannot_sample_to_the_caller() -> None:
    from livecam.analysis.networks import CpuFaceNetworks
    from livecam.analysis.second_look import StripPlace

    frame = np.zeros((720, 1280, 3), np.uint8)
    every_third = np.arange(0, 720, 3, dtype=np.int64)  # a nearest-neighbour picture
    nets = CpuFaceNetworks()
    nets.open()
    try:
        assert nets.detect_strips(frame, [StripPlace(every_third, every_third,
                                                     np.zeros(2, np.float32))]) is None
    finally:
        nets.close()


def test_the_cpu_detector_does_not_bring_the_tracker_and_scipy() -> None:
    """The edge strips' type in the detector's signature once imported the tracker, and with
    it SciPy: `livecam identity add` of a 720x720 photo peaked 30 MB higher (164 -> 194 MB),
    and the 100-megapixel PNG test went over its 300 MB."""
    import subprocess
    import sys

    code = ("import sys, livecam.analysis.networks; "
            "print([m for m in ('scipy', 'livecam.track.bytetrack') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]", result.stdout

"""BlazeFace torch port against MediaPipe's FaceDetection on real photos (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

MARGIN = 0.02  # detections this close to the score threshold may flip on 1-grey-level noise


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _mediapipe_detections(image_bgr: np.ndarray, model_selection: int
                          ) -> list[tuple[float, np.ndarray, np.ndarray]]:
    import mediapipe as mp

    height, width = image_bgr.shape[:2]
    with mp.solutions.face_detection.FaceDetection(model_selection=model_selection) as detector:
        result = detector.process(np.ascontiguousarray(image_bgr[:, :, ::-1]))
    found = []
    for det in result.detections or []:
        box = det.location_data.relative_bounding_box
        found.append((det.score[0],
                      np.array([box.xmin * width, box.ymin * height,
                                (box.xmin + box.width) * width, (box.ymin + box.height) * height]),
                      np.array([[k.x * width, k.y * height]
                                for k in det.location_data.relative_keypoints])))
    return found


def _assert_same_detections(detector, image_bgr: np.ndarray, out, index: int,  # type: ignore[no-untyped-def]
                            model_selection: int) -> int:
    """Every confident detection on either side has a partner: IoU >= 0.9, keypoints <= 1 px."""
    reference = _mediapipe_detections(image_bgr, model_selection)
    valid = out.valid[index].numpy()
    boxes = out.boxes_xyxy_px[index].numpy()[valid]
    points = out.keypoints_xy_px[index].numpy()[valid]
    scores = out.scores[index].float().numpy()[valid]
    sure = detector.min_score + MARGIN
    for score, box, keypoints in reference:
        if score < sure:
            continue
        ious = [_iou(box, b) for b in boxes]
        assert ious, f"MediaPipe found a face (score {score:.3f}) the port missed"
        j = int(np.argmax(ious))
        assert ious[j] >= 0.9
        assert np.abs(points[j] - keypoints).max() <= 1.0
        assert abs(scores[j] - score) < 0.01
    for score, box in zip(scores, boxes, strict=True):
        if score >= sure:
            assert any(_iou(box, b) >= 0.9 for _, b, _ in reference), (
                f"the port found a face (score {score:.3f}) MediaPipe did not")
    return int((scores >= sure).sum())


@pytest.mark.parametrize(("range_name", "photo", "expected"), [
    ("short", "astronaut", 1), ("full", "astronaut", 1), ("full", "t1", 3),
])
def test_detections_match_mediapipe(range_name: str, photo: str, expected: int,
                                    request: pytest.FixtureRequest) -> None:
    detector = request.getfixturevalue(f"{range_name}_detector")
    image = request.getfixturevalue(f"{photo}_bgr")
    with torch.no_grad():
        out = detector(torch.from_numpy(image)[None])
    found = _assert_same_detections(detector, image, out, 0, int(range_name == "full"))
    assert found == expected


def test_t1_tiles_in_one_batch_find_all_six_people(short_detector, t1_tiles_bgr) -> None:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        out = short_detector(torch.from_numpy(t1_tiles_bgr))
    centres = []
    for i, tile in enumerate(t1_tiles_bgr):
        _assert_same_detections(short_detector, tile, out, i, 0)
        y0, x0 = (i // 5) * 200, (i % 5) * 200
        for box in out.boxes_xyxy_px[i].numpy()[out.valid[i].numpy()]:
            centres.append(((box[0] + box[2]) / 2 + x0, (box[1] + box[3]) / 2 + y0))
    people: list[tuple[float, float]] = []
    for c in centres:
        if all(np.hypot(c[0] - p[0], c[1] - p[1]) > 40 for p in people):
            people.append(c)
    assert len(people) == 6


def test_batched_call_equals_one_frame_at_a_time(short_detector, t1_tiles_bgr) -> None:  # type: ignore[no-untyped-def]
    frames = torch.from_numpy(t1_tiles_bgr[:4])
    with torch.no_grad():
        batched = short_detector(frames)
        for i in range(4):
            single = short_detector(frames[i:i + 1])
            assert torch.equal(single.valid[0], batched.valid[i])
            assert torch.allclose(single.boxes_xyxy_px[0], batched.boxes_xyxy_px[i], atol=1e-3)


@pytest.mark.parametrize(("range_name", "photo"), [("short", "astronaut"), ("full", "t1")])
def test_letterbox_matches_mediapipe_image_to_tensor(range_name: str, photo: str,
                                                     request: pytest.FixtureRequest,
                                                     mp_image_to_tensor) -> None:  # type: ignore[no-untyped-def]
    detector = request.getfixturevalue(f"{range_name}_detector")
    image = request.getfixturevalue(f"{photo}_bgr")
    size = detector.input_size_px
    (reference,) = mp_image_to_tensor(image[:, :, ::-1], size, -1.0, 1.0)
    ours = detector.preprocess(torch.from_numpy(image)[None])[0].permute(1, 2, 0).numpy()
    grey_levels = np.abs(ours.reshape(-1) - reference) * 127.5
    # OpenCV's fixed-point bilinear weights round a few ties the other way: 1 level at most.
    assert grey_levels.max() <= 1.0 + 1e-3
    assert (grey_levels > 1e-3).mean() < 0.005


def test_fp16_detections_stay_close_to_fp32(full_detector, t1_bgr) -> None:  # type: ignore[no-untyped-def]
    import copy

    half = copy.deepcopy(full_detector).half()
    frame = torch.from_numpy(t1_bgr)[None]
    with torch.no_grad():
        ref = full_detector(frame)
        out = half(frame)
    assert out.scores.dtype == torch.float16
    assert torch.equal(ref.valid, out.valid)
    n = int(ref.valid.sum())
    assert n == 3
    for j in range(n):
        assert _iou(ref.boxes_xyxy_px[0, j].numpy(), out.boxes_xyxy_px[0, j].numpy()) > 0.95
        assert (ref.keypoints_xy_px[0, j] - out.keypoints_xy_px[0, j]).abs().max() < 2.0

"""Face mesh torch port against MediaPipe's FaceMesh on real photos (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from livecam.gpupipe.networks.facemesh import rois_from_detections, rois_from_landmarks


def _mediapipe_meshes(image_bgr: np.ndarray, frames: int = 1) -> list[np.ndarray]:
    """(468, 2) pixel landmarks per face from MediaPipe's FaceMesh after ``frames`` frames
    (frames > 1 runs its tracking mode: later ROIs come from the previous mesh)."""
    import mediapipe as mp

    height, width = image_bgr.shape[:2]
    rgb = np.ascontiguousarray(image_bgr[:, :, ::-1])
    with mp.solutions.face_mesh.FaceMesh(static_image_mode=frames == 1, max_num_faces=2) as mesh:
        for _ in range(frames):
            result = mesh.process(rgb)
    return [np.array([[p.x * width, p.y * height] for p in face.landmark])
            for face in result.multi_face_landmarks or []]


def _ours(detector, mesh, frames_bgr: np.ndarray):  # type: ignore[no-untyped-def]
    images = torch.from_numpy(frames_bgr)
    with torch.no_grad():
        det = detector(images)
        image_index = torch.arange(images.shape[0])[:, None].expand_as(det.valid)
        valid = det.valid.reshape(-1)
        rois = rois_from_detections(det.boxes_xyxy_px.reshape(-1, 4)[valid],
                                    det.keypoints_xy_px.reshape(-1, 6, 2)[valid])
        return mesh(images, image_index.reshape(-1)[valid], rois), image_index.reshape(-1)[valid]


def _nearest_mean_error(reference: np.ndarray, candidates: np.ndarray) -> float:
    return min(float(np.linalg.norm(reference - c[:, :2], axis=1).mean()) for c in candidates)


def test_mesh_matches_mediapipe_on_the_astronaut(short_detector, face_mesh,  # type: ignore[no-untyped-def]
                                                 astronaut_bgr) -> None:
    (reference,) = _mediapipe_meshes(astronaut_bgr)
    result, _ = _ours(short_detector, face_mesh, astronaut_bgr[None])
    assert result.landmarks_px.shape == (1, 468, 3)
    assert _nearest_mean_error(reference, result.landmarks_px.numpy()) <= 0.1
    assert float(result.presence[0]) > 0.9


@pytest.mark.slow
def test_mesh_matches_mediapipe_for_the_six_people_of_t1(short_detector, face_mesh,  # type: ignore[no-untyped-def]
                                                         t1_tiles_bgr) -> None:
    # All 15 tiles (many faces from many frames) in one detector call and one mesh call.
    result, image_index = _ours(short_detector, face_mesh, t1_tiles_bgr)
    landmarks = result.landmarks_px.numpy()
    compared = 0
    for i, tile in enumerate(t1_tiles_bgr):
        ours = landmarks[image_index.numpy() == i]
        for reference in _mediapipe_meshes(tile):
            assert len(ours), f"tile {i}: MediaPipe found a face the port missed"
            assert _nearest_mean_error(reference, ours) <= 1.0
            compared += 1
    assert compared >= 10  # the six people, most of them in more than one tile


def test_tracking_roi_from_landmarks_matches_mediapipe(short_detector, face_mesh,  # type: ignore[no-untyped-def]
                                                       astronaut_bgr) -> None:
    # MediaPipe's second frame (tracking mode) crops where the first frame's mesh says.
    (reference,) = _mediapipe_meshes(astronaut_bgr, frames=2)
    first, index = _ours(short_detector, face_mesh, astronaut_bgr[None])
    with torch.no_grad():
        second = face_mesh(torch.from_numpy(astronaut_bgr)[None], index,
                           rois_from_landmarks(first.landmarks_px))
    assert _nearest_mean_error(reference, second.landmarks_px.numpy()) <= 0.1
    # ...and the tracking crop differs from the detection crop, so this checked something new.
    assert np.abs(second.landmarks_px.numpy() - first.landmarks_px.numpy()).max() > 0.05


def test_fp16_mesh_stays_within_a_pixel_of_fp32(short_detector, face_mesh,  # type: ignore[no-untyped-def]
                                                astronaut_bgr) -> None:
    import copy

    half = copy.deepcopy(face_mesh).half()
    ref, index = _ours(short_detector, face_mesh, astronaut_bgr[None])
    with torch.no_grad():
        rois = rois_from_landmarks(ref.landmarks_px)
        full = face_mesh(torch.from_numpy(astronaut_bgr)[None], index, rois)
        out = half(torch.from_numpy(astronaut_bgr)[None], index, rois)
    err = (out.landmarks_px[..., :2] - full.landmarks_px[..., :2]).norm(dim=-1).mean()
    assert float(err) < 1.0

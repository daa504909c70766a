from __future__ import annotations

import numpy as np
import pytest

from livecam.analysis.landmarks import five_point
from livecam.analysis.photo import analyze_photo


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
    return float(iw * ih / union)


def test_astronaut_has_one_face_matching_mediapipe_face_mesh(astronaut_bgr: np.ndarray) -> None:
    import mediapipe as mp

    faces = analyze_photo(astronaut_bgr)
    assert len(faces) == 1
    assert faces.landmarks_xy.shape == (1, 468, 2)
    assert faces.landmarks_z.shape == (1, 468)
    assert faces.keypoints_xy.shape == (1, 6, 2)
    assert faces.track_ids.tolist() == [-1]
    with mp.solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1) as mesh:
        ref = mesh.process(np.ascontiguousarray(astronaut_bgr[:, :, ::-1]))
    h, w = astronaut_bgr.shape[:2]
    ref_xy = np.array([[p.x * w, p.y * h] for p in ref.multi_face_landmarks[0].landmark])
    err_px = np.linalg.norm(faces.landmarks_xy[0] - ref_xy, axis=1).mean()
    assert err_px <= 2.0


def test_five_points_follow_the_arcface_template_order(astronaut_bgr: np.ndarray) -> None:
    from insightface.utils.face_align import arcface_dst

    pts = five_point(analyze_photo(astronaut_bgr).landmarks_xy)[0]
    # Same left/right and up/down relations as the template: eyes above nose above mouth,
    # first eye and first mouth corner on the image's left.
    for i, j in ((0, 1), (3, 4)):
        assert (pts[i, 0] < pts[j, 0]) == (arcface_dst[i, 0] < arcface_dst[j, 0])
    assert pts[0:2, 1].max() < pts[2, 1] < pts[3:5, 1].min()
    # A least-squares similarity fit to the template (as insightface's norm_crop does) leaves
    # small residuals: the points are the same facial parts (the astronaut smiles, so the mouth
    # corners sit a little higher than the template's).
    from skimage.transform import SimilarityTransform

    tform = SimilarityTransform()
    assert tform.estimate(pts, arcface_dst)
    residual_px = np.linalg.norm(tform(pts) - arcface_dst, axis=1)
    assert residual_px.max() < 8.0


def test_all_six_people_in_t1_and_nothing_else(t1_bgr: np.ndarray) -> None:
    faces = analyze_photo(t1_bgr)
    assert len(faces) == 6
    for i in range(6):
        for j in range(i + 1, 6):
            assert _iou(faces.boxes_xyxy[i], faces.boxes_xyxy[j]) == 0.0
    areas = faces.areas_px
    assert np.all(np.diff(areas) <= 0), "largest first"
    # every face is face-sized for this group photo (a false hit on a shirt would not be)
    sides = faces.boxes_xyxy[:, 2:] - faces.boxes_xyxy[:, :2]
    assert np.all((sides > 60) & (sides < 200))


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((480, 640, 3), np.uint8),
        np.full((16, 16, 3), 128, np.uint8),
        np.random.default_rng(0).integers(0, 255, (300, 400, 3), dtype=np.uint8),
    ],
    ids=["black", "16x16", "noise"],
)
def test_no_face_gives_empty_result(image: np.ndarray) -> None:
    faces = analyze_photo(image)
    assert len(faces) == 0


def test_wrong_dtype_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        analyze_photo(np.zeros((64, 64, 3), np.float32))  # type: ignore[arg-type]

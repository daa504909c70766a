"""The direct face-mesh runner (LiteRT + our crop and projection) against MediaPipe's own graph.

Both run the same ``face_landmark.tflite`` from the installed mediapipe; the direct one must give
the landmarks the graph gives, on real faces, upright and rotated, and drop non-faces alike.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from livecam.analysis import litert
from livecam.analysis.detect import BlazeFaceDetector
from livecam.analysis.mesh import FaceMeshLandmarker
from livecam.analysis.roi import Roi, roi_from_detection


@pytest.fixture(scope="module")
def runners() -> Iterator[tuple[FaceMeshLandmarker, FaceMeshLandmarker]]:
    direct = FaceMeshLandmarker()
    direct.open()
    graph = FaceMeshLandmarker()
    # the graph is what runs where LiteRT cannot be imported: make it look absent
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(litert, "litert_interpreter", lambda: None)
        graph.open()
    assert (direct.runner, graph.runner) == ("direct", "graph")
    yield direct, graph
    direct.close()
    graph.close()


def _rois(image: np.ndarray) -> list[Roi]:
    with BlazeFaceDetector(model="auto", min_score=0.5, max_faces=8) as det:
        dets = det.detect(image, all_tiles=True)
    return [roi_from_detection(dets.boxes_xyxy[i], dets.keypoints_xy[i])
            for i in range(len(dets))]


@pytest.mark.parametrize("turn_rad", [0.0, 0.35])
def test_direct_landmarks_equal_mediapipe_graph(
        runners: tuple[FaceMeshLandmarker, FaceMeshLandmarker], t1_bgr: np.ndarray,
        astronaut_bgr: np.ndarray, turn_rad: float) -> None:
    direct, graph = runners
    compared = 0
    for image in (t1_bgr, astronaut_bgr):
        rois = [Roi(r.center_x_px, r.center_y_px, r.size_px, r.rotation_rad + turn_rad)
                for r in _rois(image)]
        assert rois
        for a, b in zip(direct.landmarks(image, rois), graph.landmarks(image, rois), strict=True):
            assert (a is None) == (b is None)
            if a is None or b is None:
                continue
            # the graph crops with warpPerspective, we with warpAffine (same map, 1/32 px
            # rounding may differ): thousandths of a pixel
            assert np.abs(a.landmarks_xy - b.landmarks_xy).mean() < 0.02
            assert np.abs(a.landmarks_xy - b.landmarks_xy).max() < 0.1
            assert np.abs(a.landmarks_z - b.landmarks_z).mean() < 0.02
            compared += 1
    assert compared >= 6  # six people in t1, the astronaut


def test_direct_drops_a_roi_with_no_face(
        runners: tuple[FaceMeshLandmarker, FaceMeshLandmarker], astronaut_bgr: np.ndarray) -> None:
    direct, graph = runners
    sky = Roi(center_x_px=440.0, center_y_px=60.0, size_px=80.0, rotation_rad=0.0)
    assert graph.landmarks(astronaut_bgr, [sky]) == [None]
    assert direct.landmarks(astronaut_bgr, [sky]) == [None]


def test_refined_landmarks_use_the_graph() -> None:
    with FaceMeshLandmarker(refine_landmarks=True) as refined:
        assert refined.runner == "graph" and refined.num_landmarks == 478

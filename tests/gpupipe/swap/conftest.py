"""Real landmarks on real photos (MediaPipe on the CPU), shared by the GPU swap tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest


@dataclass(frozen=True)
class PhotoFaces:
    image_bgr: np.ndarray
    landmarks_xy: np.ndarray  # (N, 468, 2)
    five_xy: np.ndarray  # (N, 5, 2), ArcFace order


@pytest.fixture(scope="session")
def astronaut_faces(astronaut_bgr: np.ndarray) -> PhotoFaces:
    """The astronaut with her face mesh from MediaPipe itself (the CPU analysis path)."""
    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(astronaut_bgr)
    assert len(faces) == 1
    lm = faces.landmarks_xy[:, :468]
    return PhotoFaces(astronaut_bgr, lm, five_point(lm))


@pytest.fixture(scope="session")
def t1_faces() -> PhotoFaces:
    """insightface's t1.jpg (six people) with MediaPipe meshes of every face found."""
    from insightface.data import get_image

    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo

    image = get_image("t1")
    faces = analyze_photo(image)
    assert len(faces) >= 4
    lm = faces.landmarks_xy[:, :468]
    return PhotoFaces(image, lm, five_point(lm))

"""An independent judge of identity: dlib's 128-d face ResNet (``face-recognition-models``).

``identity add`` uses it to refuse photos of different people in one identity
(:mod:`livecam.identity.same_person`); the swap tests and ``scripts/judge_swap.py`` use it to
check that a swapped face looks like the source person, by a recognizer the swap never saw.
Distances: same person ≈ 0.2-0.5, different people 0.6-0.95 (dlib's threshold is 0.6). Needs
the ``identity`` extra. Any one thread per instance.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from livecam.core.errors import DependencyError

ImageBGR = npt.NDArray[np.uint8]


def _models_dir() -> Path:
    # importing face_recognition_models fails on new setuptools (pkg_resources): find its files
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or spec.origin is None:
        raise DependencyError("face-recognition-models is not installed: "
                              "pip install 'livecam[identity]'")
    return Path(spec.origin).parent / "models"


class FaceJudge:
    """dlib 5-point alignment + ResNet embedding of a face given by its box."""

    def __init__(self) -> None:
        import dlib

        models = _models_dir()
        self._dlib = dlib
        self._shape = dlib.shape_predictor(str(models / "shape_predictor_5_face_landmarks.dat"))
        self._net = dlib.face_recognition_model_v1(
            str(models / "dlib_face_recognition_resnet_model_v1.dat"))

    def embed(self, image_bgr: ImageBGR, box_xyxy: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """(128,) float64 embedding of the face in ``box_xyxy`` (x1, y1, x2, y2 pixels)."""
        x1, y1, x2, y2 = (round(float(v)) for v in np.asarray(box_xyxy).ravel()[:4])
        rgb = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2RGB)
        rect = self._dlib.rectangle(x1, y1, x2, y2)
        shape = self._shape(rgb, rect)
        return np.asarray(self._net.compute_face_descriptor(rgb, shape), np.float64)


def dlib_box_from_mesh(landmarks_xy: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """A dlib-style face box (brows to chin, cheek to cheek) from a 468-point mesh."""
    xy = landmarks_xy[:468]
    x1, x2 = float(xy[:, 0].min()), float(xy[:, 0].max())
    y_top = float(xy[[70, 63, 105, 66, 107, 336, 296, 334, 293, 300], 1].min())
    y2 = float(xy[:, 1].max())
    return np.array([x1, y_top, x2, y2], np.float32)


def distance(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    return float(np.linalg.norm(a - b))

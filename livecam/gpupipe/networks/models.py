"""Locate MediaPipe's bundled ``.tflite`` files and build the torch modules from them.

The files ship inside ``mediapipe==0.10.21``; :func:`~livecam.analysis.litert.mediapipe_modules_dir`
finds them without importing mediapipe (and its graph runtime). On machines without mediapipe
(the GPU box) pass ``models_dir``: a copy of ``mediapipe/modules`` (only the ``.tflite`` files
are read).
"""

from __future__ import annotations

from pathlib import Path

from livecam.analysis.litert import mediapipe_modules_dir
from livecam.core.errors import ModelError
from livecam.gpupipe.networks.blazeface import FULL_RANGE, SHORT_RANGE, BlazeFaceDetector
from livecam.gpupipe.networks.facemesh import FACE_LANDMARK_RELPATH, FaceMeshLandmarker
from livecam.gpupipe.networks.tflite_reader import read_tflite
from livecam.gpupipe.networks.tflite_torch import TfliteGraphModule


def model_path(relpath: str, models_dir: str | Path | None = None) -> Path:
    """Path of one bundled model, e.g. ``face_detection/face_detection_short_range.tflite``."""
    root = Path(models_dir) if models_dir is not None else mediapipe_modules_dir()
    path = root / relpath
    if not path.is_file():
        raise ModelError(f"{path} is missing: mediapipe 0.10.21 ships it; later releases do not "
                         "(pip install mediapipe==0.10.21), or copy it into models_dir")
    return path


def load_blazeface(range_name: str = "short", *, models_dir: str | Path | None = None,
                   max_faces: int = 8, max_candidates: int = 128,
                   min_score: float | None = None) -> BlazeFaceDetector:
    """BlazeFace ``"short"`` (128 px input, faces within ~2 m) or ``"full"`` (192 px, ~5 m)
    range, on the CPU in float32; move it with ``.to(device, dtype)``."""
    specs = {"short": SHORT_RANGE, "full": FULL_RANGE}
    if range_name not in specs:
        raise ModelError(f"unknown BlazeFace range {range_name!r}: use 'short' or 'full'")
    spec = specs[range_name]
    net = TfliteGraphModule(read_tflite(model_path(spec.model_relpath, models_dir)))
    return BlazeFaceDetector(net, spec, max_faces=max_faces, max_candidates=max_candidates,
                             min_score=min_score).eval()


def load_face_mesh(*, models_dir: str | Path | None = None) -> FaceMeshLandmarker:
    """The 468-point face mesh (``face_landmark.tflite``) on the CPU in float32."""
    net = TfliteGraphModule(read_tflite(model_path(FACE_LANDMARK_RELPATH, models_dir)))
    return FaceMeshLandmarker(net).eval()

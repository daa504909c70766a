"""Face selection: which of the tracked faces go on to the swap (``analysis.select``).

``all`` keeps every face, ``largest`` the biggest box, ``center`` the face nearest the frame
centre, ``reference`` only faces whose dlib 128-d embedding is within
``reference_max_distance`` of a reference photo's ("only swap me, not my guest"). The
embedding is computed once per track (and again every ``recheck_frames`` while it does not
match), not every frame: it costs ~60 ms per face on a laptop CPU.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from livecam.core.errors import DependencyError, IdentityError
from livecam.core.types import Faces, ImageBGR

log = logging.getLogger(__name__)

SELECT_MODES = ("all", "largest", "center", "reference")


def _dlib_model_dir() -> Path:
    # face_recognition_models' __init__ imports pkg_resources, which is gone from setuptools>=81,
    # so we locate its files without importing it.
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or spec.origin is None or importlib.util.find_spec("dlib") is None:
        raise DependencyError(
            "analysis.select: reference needs dlib and face-recognition-models: "
            "pip install 'livecam[identity]'")
    return Path(spec.origin).parent / "models"


class DlibFaceEmbedder:
    """dlib's ResNet 128-d face embedding for a face given by its box. Any one thread."""

    def __init__(self) -> None:
        self._shape: Any = None
        self._encoder: Any = None

    def open(self) -> None:
        if self._encoder is not None:
            return
        models = _dlib_model_dir()
        import dlib

        self._shape = dlib.shape_predictor(str(models / "shape_predictor_5_face_landmarks.dat"))
        self._encoder = dlib.face_recognition_model_v1(
            str(models / "dlib_face_recognition_resnet_model_v1.dat"))

    def close(self) -> None:
        self._shape = self._encoder = None

    def embed(self, image_bgr: ImageBGR, box_xyxy: np.ndarray) -> np.ndarray:
        """(128,) float64 embedding of the face in ``box_xyxy`` (4,) px."""
        import dlib

        if self._encoder is None:
            self.open()
        rgb = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2RGB)
        x1, y1, x2, y2 = (round(float(v)) for v in box_xyxy)
        shape = self._shape(rgb, dlib.rectangle(x1, y1, x2, y2))
        return np.asarray(self._encoder.compute_face_descriptor(rgb, shape), dtype=np.float64)


class FaceSelector:
    """Picks faces from a tracked :class:`Faces` (returns a new object, input untouched).

    ``reference_embeddings`` (R, 128) are needed for ``reference`` (see
    :func:`reference_embeddings_from_photos`). Only the pipeline thread may call ``select``.
    """

    def __init__(self, mode: str = "all", *, reference_embeddings: np.ndarray | None = None,
                 max_distance: float = 0.6, recheck_frames: int = 30,
                 embedder: DlibFaceEmbedder | None = None) -> None:
        if mode not in SELECT_MODES:
            raise ValueError(f"select must be one of {', '.join(SELECT_MODES)}, got {mode!r}")
        if mode == "reference" and (reference_embeddings is None or len(reference_embeddings)
                                    == 0):
            raise IdentityError("analysis.select: reference needs at least one face in "
                                "analysis.reference_photos")
        self.mode = mode
        self.reference_embeddings = reference_embeddings
        self.max_distance = max_distance
        self.recheck_frames = recheck_frames
        self._embedder = embedder or (DlibFaceEmbedder() if mode == "reference" else None)
        self._verdicts: dict[int, tuple[bool, int]] = {}  # track id -> (matches, frame checked)
        self._frame = 0

    def open(self) -> None:
        if self._embedder is not None:
            self._embedder.open()

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()

    def select(self, faces: Faces, image_bgr: ImageBGR) -> Faces:
        self._frame += 1
        if len(faces) == 0 or self.mode == "all":
            return faces
        if self.mode == "largest":
            return faces[[int(np.argmax(faces.areas_px))]]
        if self.mode == "center":
            h, w = image_bgr.shape[:2]
            centres = (faces.boxes_xyxy[:, :2] + faces.boxes_xyxy[:, 2:]) / 2
            dist = np.hypot(centres[:, 0] - w / 2, centres[:, 1] - h / 2)
            return faces[[int(np.argmin(dist))]]
        keep = np.array([self._matches(int(faces.track_ids[i]), image_bgr, faces.boxes_xyxy[i])
                         for i in range(len(faces))], bool)
        alive = {int(t) for t in faces.track_ids}
        for tid in [t for t in self._verdicts if t not in alive]:
            del self._verdicts[tid]
        return faces[keep]

    def _matches(self, track_id: int, image_bgr: ImageBGR, box_xyxy: np.ndarray) -> bool:
        verdict = self._verdicts.get(track_id) if track_id >= 0 else None
        if verdict is not None and (verdict[0] or self._frame - verdict[1] < self.recheck_frames):
            return verdict[0]
        assert self._embedder is not None and self.reference_embeddings is not None
        emb = self._embedder.embed(image_bgr, box_xyxy)
        distance = float(np.linalg.norm(self.reference_embeddings - emb, axis=1).min())
        ok = distance <= self.max_distance
        log.debug("track %d: reference distance %.3f -> %s", track_id, distance, ok)
        if track_id >= 0:
            self._verdicts[track_id] = (ok, self._frame)
        return ok


def reference_embeddings_from_photos(photos: Sequence[str | Path | ImageBGR],
                                     embedder: DlibFaceEmbedder | None = None, *,
                                     max_megapixels: float = 100.0) -> np.ndarray:
    """(R, 128) embeddings, one per photo (its largest face). Raises IdentityError when a photo
    cannot be read, is larger than ``max_megapixels`` (from its header, before decoding) or
    shows no face."""
    from livecam.analysis.photo import analyze_photo

    embedder = embedder or DlibFaceEmbedder()
    embedder.open()
    out = []
    for photo in photos:
        name = "(array)" if isinstance(photo, np.ndarray) else str(photo)
        image = photo if isinstance(photo, np.ndarray) else _read_reference(
            Path(photo), max_megapixels)
        faces = analyze_photo(image, max_faces=4)
        if len(faces) == 0:
            raise IdentityError(f"reference photo {name} shows no face: use a clear, frontal "
                                "photo")
        out.append(embedder.embed(image, faces.boxes_xyxy[0]))
    return np.stack(out)


def _read_reference(path: Path, max_megapixels: float) -> ImageBGR:
    """The photo at ``path`` decoded as `image:` inputs are (the size from the header first;
    a file cut short refused, not half grey), or IdentityError in one line."""
    from livecam.capture.still import DECODE_PIXELS, decode_image, input_kind
    from livecam.core.errors import InputError

    label = f"reference photo {path}"
    try:
        if input_kind(path, "reference photo") != "file":
            raise IdentityError(f"{label} is not a file (a pipe or a device): save the photo "
                                "to a file first")
        return decode_image(path, max_pixels=round(max_megapixels * 1e6), label=label,
                            knob="advanced.capture.max_image_megapixels",
                            decode_pixels=DECODE_PIXELS)
    except InputError as exc:
        raise IdentityError(str(exc)) from None

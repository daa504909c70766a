"""Helpers for the GPU stage tests: stand-in models installed the way users install the real
ones, and frames with real faces.

The real inswapper_128 and w600k_r50 are downloads (``livecam models fetch``); the stand-ins
have the same inputs and outputs. Their manifests are the repository's, with the stand-ins'
sha256 as the accepted hash, so the store verifies them exactly as it verifies real files.
"""

from __future__ import annotations

import hashlib

import cv2
import numpy as np

from livecam.identity.model import Identity, IdentityPhoto
from tests.helpers.standins import install_standin_models

__all__ = ["face_frame", "identity_from_photo", "install_standin_models"]


def face_frame(photo_bgr: np.ndarray, size: tuple[int, int] = (480, 360)) -> np.ndarray:
    """The photo scaled to the frame height, centred on a grey frame of ``size`` (W, H)."""
    w, h = size
    frame = np.full((h, w, 3), 120, np.uint8)
    side = min(h, w)
    x0 = (w - side) // 2
    frame[(h - side) // 2:(h - side) // 2 + side, x0:x0 + side] = cv2.resize(
        photo_bgr, (side, side), interpolation=cv2.INTER_AREA)
    return frame


def identity_from_photo(name: str, photo_bgr: np.ndarray) -> Identity:
    """An identity whose one photo is ``photo_bgr`` with MediaPipe's landmarks (the library
    stores the same two things)."""
    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(photo_bgr)
    assert len(faces) >= 1, "the photo must show a face"
    photo = IdentityPhoto(sha256=hashlib.sha256(photo_bgr.tobytes()).hexdigest(),
                          texture_bgr=photo_bgr, landmarks_xy=faces.landmarks_xy[0, :468],
                          landmarks_z=faces.landmarks_z[0, :468])
    return Identity(name=name, photos=(photo,))

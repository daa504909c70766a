"""Helpers for the GPU stage tests: stand-in models installed the way users install the real
ones, and frames with real faces.

The real inswapper_128 and w600k_r50 are downloads (``livecam models fetch``); the stand-ins
have the same inputs and outputs. Their manifests are the repository's, with the stand-ins'
sha256 as the accepted hash, so the store verifies them exactly as it verifies real files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np
import yaml

from livecam.engines.manifest import default_manifests_dir
from livecam.engines.store import ModelStore, sha256_file
from livecam.identity.model import Identity, IdentityPhoto
from livecam.testing.standins import build_arcface, build_inswapper


def install_standin_models(root: Path) -> tuple[Path, Path]:
    """Write stand-in inswapper_128 (dynamic batch) and w600k_r50 plus manifests accepting
    them under ``root``; returns (models_dir, manifests_dir) for the ``models`` config."""
    models_dir, manifests_dir, build_dir = root / "models", root / "manifests", root / "build"
    for d in (models_dir, manifests_dir, build_dir):
        d.mkdir(parents=True, exist_ok=True)
    built = {"inswapper_128": build_inswapper(build_dir / "inswapper_128.onnx", batch="N"),
             "w600k_r50": build_arcface(build_dir / "w600k_r50.onnx")}
    for name, path in built.items():
        data = yaml.safe_load((default_manifests_dir() / f"{name}.yaml").read_text())
        data["sources"] = [{"url": "file:///standin", "sha256": sha256_file(path)}]
        (manifests_dir / f"{name}.yaml").write_text(yaml.safe_dump(data))
    from livecam.engines.manifest import load_manifests

    store = ModelStore(models_dir, load_manifests(manifests_dir))
    for name, path in built.items():
        store.adopt(name, path)
    return models_dir, manifests_dir


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

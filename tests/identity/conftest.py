"""Photos for the identity library tests, written as files from installed packages' images."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.config.identity import IdentityConfig
from livecam.identity import IdentityLibrary


@pytest.fixture
def library(tmp_path: Path) -> IdentityLibrary:
    """A library in tmp_path (never the real user data dir)."""
    return IdentityLibrary(tmp_path / "lib", IdentityConfig())


@pytest.fixture(scope="session")
def photos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import insightface.data
    from skimage import data

    folder = tmp_path_factory.mktemp("photos")
    astronaut = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    big = cv2.resize(astronaut, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC)  # 186 px face
    out = {
        "good": big,
        "good_jpg": big,
        "small": astronaut,  # 93 px face: accepted only with force
        "tiny": cv2.resize(astronaut, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA),
        "grey": cv2.cvtColor(big, cv2.COLOR_BGR2GRAY),
        "group": cv2.resize(insightface.data.get_image("t1"), None, fx=2, fy=2),
        "noface": np.tile(np.linspace(40, 220, 640, dtype=np.uint8)[None, :, None], (480, 1, 3)),
    }
    paths = {}
    for name, image in out.items():
        ext = ".jpg" if name == "good_jpg" else ".png"
        path = folder / f"{name}{ext}"
        cv2.imwrite(str(path), image)
        paths[name] = path
    paths["text"] = folder / "notes.jpg"
    paths["text"].write_text("this is not an image\n")
    paths["corrupt"] = folder / "corrupt.jpg"
    paths["corrupt"].write_bytes(b"\xff\xd8\xff\xe0" + bytes(np.random.default_rng(0).integers(
        0, 256, 4000, dtype=np.uint8)))
    paths["empty"] = folder / "empty.png"
    paths["empty"].write_bytes(b"")
    return paths

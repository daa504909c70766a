"""insightface's six-person photo, loaded at test time from the installed wheel (never committed).

``astronaut_bgr`` comes from tests/conftest.py. On a GPU machine without insightface, point
``LIVECAM_TEST_PHOTOS`` at the folder ``scripts/device/export_bench_assets.py`` wrote (it
holds t1.png).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import cv2
import numpy as np
import pytest


@pytest.fixture(scope="session")
def t1_bgr() -> np.ndarray:
    folder = os.environ.get("LIVECAM_TEST_PHOTOS")
    if importlib.util.find_spec("insightface") is None and folder:
        image = cv2.imread(str(Path(folder) / "t1.png"), cv2.IMREAD_COLOR)
        assert image is not None, f"no t1.png in {folder}"
        return image
    from insightface.data import get_image

    return np.ascontiguousarray(get_image("t1"))

"""Real face photos from installed packages, loaded at test time (never committed)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def astronaut_bgr() -> np.ndarray:
    from skimage.data import astronaut

    return np.ascontiguousarray(astronaut()[:, :, ::-1])


@pytest.fixture(scope="session")
def t1_bgr() -> np.ndarray:
    insightface_data = pytest.importorskip("insightface.data")
    return np.ascontiguousarray(insightface_data.get_image("t1"))

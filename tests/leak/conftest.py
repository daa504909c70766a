"""The leak measure's clips (real faces from insightface's t1 photo), built once per session."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.leak_clips import LeakClip, leak_clips, t1_photo


@pytest.fixture(scope="session")
def t1_bgr() -> np.ndarray:
    return t1_photo()


@pytest.fixture(scope="session")
def clips(t1_bgr: np.ndarray) -> dict[str, LeakClip]:
    return leak_clips(t1_bgr)

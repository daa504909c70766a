"""Shared fixtures: real face photos from installed packages, fast configs."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.config import Config, load_config


@pytest.fixture
def fast_config() -> Config:
    """Defaults with status lines off (tests read metrics directly)."""
    return load_config(None, ["pipeline.status_interval_s=0"])


@pytest.fixture(scope="session")
def astronaut_bgr() -> np.ndarray:
    """skimage's astronaut (512x512, one real face), as BGR."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])

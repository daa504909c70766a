"""insightface's six-person photo, loaded at test time from the installed wheel (never committed).

``astronaut_bgr`` comes from tests/conftest.py. On a GPU machine without insightface, point
``LIVECAM_TEST_PHOTOS`` at the folder ``scripts/device/export_bench_assets.py`` wrote (it
holds t1.png).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.leak_clips import t1_photo


@pytest.fixture(scope="session")
def t1_bgr() -> np.ndarray:
    return t1_photo()

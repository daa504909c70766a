"""insightface's six-person photo, loaded at test time from the installed wheel (never committed).

``astronaut_bgr`` comes from tests/conftest.py.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def t1_bgr() -> np.ndarray:
    from insightface.data import get_image

    return np.ascontiguousarray(get_image("t1"))

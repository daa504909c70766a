"""Shared fixtures: real face photos from installed packages, fast configs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import numpy as np
import pytest

from livecam.config import Config, load_config


@pytest.fixture(scope="session", autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point the user data/config/cache dirs (platformdirs follows XDG on Linux) at a temporary
    folder for the whole run, subprocesses included, so no test reads or writes the real home
    (identity library, control token, models, engine cache, device locks: test runs that
    share this machine must not refuse each other's virtual camera)."""
    root = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "XDG_CONFIG_HOME",
                                            "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")}
    for key in saved:
        os.environ[key] = str(root / key.lower())
    (root / "xdg_runtime_dir").mkdir(mode=0o700)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    """The CLI, run in-process by tests, points the root logger at the sys.stderr of that moment:
    pytest's capture file, closed after the test. Put the root logger back so later tests do not
    log into a closed file."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def fast_config() -> Config:
    """Defaults with status lines off (tests read metrics directly)."""
    return load_config(None, ["advanced.pipeline.status_interval_s=0"])


@pytest.fixture(scope="session")
def astronaut_bgr() -> np.ndarray:
    """skimage's astronaut (512x512, one real face), as BGR."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])


@pytest.fixture(scope="session")
def t1_bgr() -> np.ndarray:
    """insightface's six-person photo (``t1``), loaded from the installed wheel (never
    committed); on a GPU machine without insightface, ``LIVECAM_TEST_PHOTOS`` names the folder
    ``scripts/device/export_bench_assets.py`` wrote (it holds t1.png)."""
    from tests.helpers.leak_clips import t1_photo

    return t1_photo()

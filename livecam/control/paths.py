"""Where control writes files: snapshots (user data dir by default)."""

from __future__ import annotations

import time
from pathlib import Path


def snapshot_dir(configured: str) -> Path:
    """``advanced.control.snapshot_dir``, or ``snapshots`` in the user data dir when empty."""
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("livecam", appauthor=False)) / "snapshots"


def new_snapshot_path(folder: Path) -> Path:
    """A fresh PNG name in ``folder``, stamped to the millisecond (local time)."""
    now_ns = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now_ns / 1e9))
    return folder / f"livecam-{stamp}-{now_ns // 1_000_000 % 1000:03d}.png"

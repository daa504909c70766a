"""Atomic file writes, for files other processes (or a later run) read while they change:
the engine cache, the model store's stamps and pins, the identity library; and the folders a
setting names."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from livecam.core.errors import ConfigError


def make_folder(path: Path, setting: str) -> None:
    """Create the folder ``path`` (and its parents) that the setting ``setting`` names;
    :class:`ConfigError` saying what to do when it cannot be (a file in the way, no
    permission, a read-only disk)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        what = ("is a file, not a folder" if path.exists() and not path.is_dir()
                else f"cannot be created ({exc.strerror or exc})")
        raise ConfigError(f"{setting} {path} {what}: set {setting} to a folder you can "
                          "write") from None


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader (or a crash) sees the old or the new file
    whole: a temp file beside it (``.<name>.*.tmp``), flushed to disk, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""Folders that cannot be written: a full disk and a read-only one, for real.

A tiny ``tmpfs`` filled to the last byte gives a real ``ENOSPC`` and a read-only mount a real
``EROFS``, whoever runs the test (root writes through a folder's mode bits, so ``chmod`` alone
would not stop it). Mounting needs root (or CAP_SYS_ADMIN): elsewhere a test that needs a full
disk is skipped with the reason, and a read-only folder falls back to ``chmod 0555``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def _mount(folder: Path, options: str) -> bool:
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, timeout=30)
    return done.returncode == 0


def _unmount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True, timeout=30).returncode:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


@contextlib.contextmanager
def full_folder(folder: Path, *, size_kib: int = 64,
                prepare: Callable[[Path], object] | None = None) -> Iterator[Path]:
    """``folder`` on a file system with no byte left (a filler file takes it all), after
    ``prepare(folder)`` wrote what it wants there."""
    if not _mount(folder, f"size={size_kib}k,mode=0777"):
        pytest.skip("a full disk needs a tmpfs mount, which needs root here")
    try:
        if prepare is not None:
            prepare(folder)
        with open(folder / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
        yield folder
    finally:
        _unmount(folder)


@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[Path]:
    """An empty ``folder`` nothing can be written in (a read-only mount, else mode 0555)."""
    if _mount(folder, "ro,size=16k"):
        try:
            yield folder
        finally:
            _unmount(folder)
        return
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)

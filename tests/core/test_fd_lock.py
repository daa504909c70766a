"""One non-blocking file lock (:mod:`livecam.core.fd_lock`), used by the output file's lock and
the photo folders' markers: held means refused elsewhere, and a killed holder's lock is free."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import livecam
from livecam.core.fd_lock import try_lock, unlock

ROOT = Path(livecam.__file__).parent


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)


def test_a_held_lock_is_refused_to_another_open_until_released(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first, second = _open(path), _open(path)
    try:
        assert try_lock(first)
        assert not try_lock(second)
        unlock(first)
        assert try_lock(second)
        assert not try_lock(first)
    finally:
        os.close(first)
        os.close(second)


def test_a_killed_holders_lock_is_free(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys\nfrom livecam.core.fd_lock import try_lock\n"
         f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
         "print(try_lock(fd), flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT.parent)})
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "True"  # held by the child now
        fd = _open(path)
        try:
            assert not try_lock(fd)
            holder.kill()
            holder.wait()
            assert try_lock(fd)
        finally:
            os.close(fd)
    finally:
        holder.kill()
        holder.wait()


def test_the_product_locks_descriptors_in_one_place() -> None:
    """Issue 43: ``remote/photo_folders.py`` wrote its own flock/msvcrt try-lock beside
    ``daemon/file_lock.py``'s; only :mod:`livecam.core.fd_lock` calls the system's locks."""
    calling = []
    for path in ROOT.rglob("*.py"):
        if path == ROOT / "core" / "fd_lock.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                    (node.value.id, node.attr) in {("fcntl", "flock"), ("fcntl", "lockf"),
                                                   ("msvcrt", "locking")}):
                calling.append(f"{path.relative_to(ROOT)}: {node.value.id}.{node.attr}")
    assert not calling, "file locks taken outside livecam/core/fd_lock.py:\n" + "\n".join(
        calling)

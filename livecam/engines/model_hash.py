"""Hashing a model file, and the identity (size, mtime, ctime, inode) a stamp records of it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 1 << 20

ProgressFn = Callable[[int, int | None], None]  # (bytes so far, total bytes or None)


def sha256_file(path: Path, progress: ProgressFn | None = None) -> str:
    """The file's sha256 (hex); ``progress(done, total)`` after each MiB when given."""
    return hash_file(path, progress).sha256


def identity_of(st: os.stat_result) -> dict[str, int]:
    """What a stamp compares: a file with all four unchanged is taken as not rewritten (ctime
    cannot be set back by a program)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino}


@dataclass(frozen=True)
class Hashed:
    """A file's sha256 and the identity (size, mtime, ctime, inode) of the file that was read;
    ``steady`` is False when that identity changed while it was read (a writer in place)."""

    sha256: str
    identity: dict[str, int]
    steady: bool


def hash_file(path: Path, progress: ProgressFn | None = None) -> Hashed:
    """Hash ``path`` through one handle (:func:`sha256_file`'s ``progress``), identity from it."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        before = identity_of(os.fstat(f.fileno()))
        done = 0
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
            done += len(block)
            if progress is not None:
                progress(done, before["size"])
        after = identity_of(os.fstat(f.fileno()))
    return Hashed(digest.hexdigest(), after, after == before)

"""Atomic file writes, for files other processes (or a later run) read while they change:
the engine cache, the model store's stamps and pins, the identity library, ``analyze``'s JSON;
atomic creates, for a file made once that must never be seen half written (the control API's
token); and the folders a setting names.

A write goes through a temp file beside its target (``.<name>.<random>.tmp``). A process
killed in the middle (``kill -9``, ``TerminateProcess`` on Windows, a power cut) runs no
cleanup and leaves that temp file, as large as what it wrote, for good: nothing reads it. So
each writer's next start (or next write) calls :func:`remove_temp_files` while it holds the
lock that every writer of those files holds while it writes (the model's lock for a stamp, the
engine cache's lock, the identity library's, the token's): then no temp file it finds is a
write under way. A lock says this exactly, where an age would not (a slow disk, a suspended
laptop), and the system drops it when its holder dies however it dies.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

TEMP_SUFFIX = ".tmp"

#: errno -> what it means for a write: a disk that cannot take it, said as one line (the
#: writes above leave nothing half-written, so there is nothing to explain but the disk)
_DISK_ERRORS = {
    errno.ENOSPC: "the disk is full",
    getattr(errno, "EDQUOT", errno.ENOSPC): "the disk quota is used up",
    errno.EROFS: "the disk is read-only",
    errno.EFBIG: "the file is too large for its file system",
}


def disk_error_line(exc: BaseException) -> str | None:
    """One line for a write that failed because of the disk (full, over quota, read-only,
    too large a file), saying what to do; None for any other error. Any thread."""
    if not isinstance(exc, OSError) or exc.errno not in _DISK_ERRORS:
        return None
    where = f"cannot write {exc.filename}" if exc.filename else "cannot write a file"
    return (f"{where}: {_DISK_ERRORS[exc.errno]} ({exc.strerror}); nothing half-written was "
            "left: free some space, or point the setting at another disk, and run again")


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno and exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc  # say which file
        raise


def atomic_create(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Create ``path`` holding ``data`` so that it appears whole or not at all, and only if
    there is no ``path`` yet (:class:`FileExistsError` then: the first creator wins).

    A temp file beside it (``.<name>.*.tmp``, mode ``mode`` before anything is written to
    it), flushed to disk, then hard-linked to ``path`` (a link fails where the name exists,
    unlike a rename on POSIX) and removed. Where the file system has no hard links (FAT,
    exFAT, some network shares) it is renamed instead: Windows refuses to rename over a file,
    POSIX checks first and replaces what appeared since, so there only callers that hold one
    lock around their creates are exclusive. A creator killed before the link leaves only
    the temp file, one killed after it the file and a second name of it: see
    :func:`remove_temp_files`. Folder made if missing. Any thread.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            _set_mode(tmp, mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links on this file system
            _rename_if_absent(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _set_mode(path: str, mode: int) -> None:
    if sys.platform == "win32":
        return  # the file has its folder's ACL; a mode there would only set read-only
    os.chmod(path, mode)  # mkstemp's 0600 is filtered by the umask: make it exactly ``mode``


def _rename_if_absent(tmp: str, path: Path) -> None:
    if sys.platform == "win32":
        os.rename(tmp, path)  # FileExistsError where path exists
        return
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    os.rename(tmp, path)


def temp_files(folder: Path, target_name: str | None = None) -> list[Path]:
    """The temp files :func:`atomic_write` (or :func:`atomic_create`) made in ``folder`` for
    the file ``target_name`` (for any file: None) and has not removed: writes under way, and
    what killed ones left. Plain files only, sorted. Any thread."""
    name = "*" if target_name is None else glob.escape(target_name)
    found: Iterable[Path] = folder.glob(f".{name}.*{TEMP_SUFFIX}") if folder.is_dir() else ()
    if target_name is not None:  # mkstemp's part has no dot: not the temp of "<name>.x"
        start, end = len(target_name) + 2, -len(TEMP_SUFFIX)
        found = (p for p in found if "." not in p.name[start:end])
    return sorted(p for p in found if p.is_file() and not p.is_symlink())


def remove_temp_files(folder: Path, target_name: str | None = None) -> list[Path]:
    """Remove :func:`temp_files` ``(folder, target_name)``, saying so; returns what went.

    Only for a caller that holds the lock every writer of those files holds while it writes
    (see the module's docstring): another one's temp file may be a write under way. Any
    thread."""
    removed, size_bytes = [], 0
    for path in temp_files(folder, target_name):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove: left
            size = path.stat().st_size
            path.unlink()
            removed.append(path)
            size_bytes += size
    if removed:
        log.info("removed %d temp file(s) (%.1f MB) left in %s by a livecam stopped while it "
                 "wrote", len(removed), size_bytes / 1e6, folder)
    return removed

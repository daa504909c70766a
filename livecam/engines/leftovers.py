"""What a livecam killed while it wrote a model leaves in the store, and its removal: the
folders in which imports stage their copies, and partial downloads nothing will resume.

An import copies the user's file into a folder of its own beside the model
(``.<file>.<random>.import/``), so that the move into place is a rename on one file system and
no other process writes the copy. It holds the lock ``owner.lock`` inside that folder for as
long as it uses the folder. A process killed with ``kill -9`` (``TerminateProcess`` on
Windows) cannot remove its folder, which is as large as the model, but the system drops its
lock: a folder whose lock can be taken has no owner left, and :func:`remove_abandoned`
removes it. A lock says this exactly, where a pid in the name would not: a pid is reused by
unrelated processes, and means nothing on another computer that shares the folder.

A folder is made and its lock taken under the store-wide ``.staging.lock``, and
:func:`remove_abandoned` looks under the same lock, so it never finds a live folder whose
lock is not taken yet. Threads of this process skip the folders this process owns (a
network file system may emulate ``flock`` with locks that are per process, not per handle).

A fetch killed midway leaves its ``.part``, which the next fetch resumes; once the model is
installed another way no fetch will, and :func:`remove_unused_partial` removes it unless a
fetch holds its download lock.

A stamp or ``pins.json`` is written through a temp file beside it
(:func:`livecam.core.files.atomic_write`) by a process that holds its lock (the model's lock,
``.pins.lock``); one killed before the rename leaves the temp file.
:func:`remove_unused_temp_files` removes those when that lock is free, and the next write of
the file, holding the lock, removes them too.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from livecam.core.files import remove_temp_files, temp_files
from livecam.engines.store_locks import held_if_free, holding

log = logging.getLogger(__name__)

SUFFIX = ".import"
OWNER_LOCK = "owner.lock"
_STAGING_LOCK = ".staging.lock"

_ours: set[Path] = set()  # the folders this process uses now
_ours_lock = threading.Lock()


def _size_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def _remove_abandoned(models_dir: Path) -> list[tuple[Path, int]]:
    """(folder, bytes) of each import folder removed; the caller holds ``.staging.lock``."""
    from filelock import FileLock, Timeout

    removed = []
    for folder in sorted(models_dir.glob(f".*{SUFFIX}")):
        with _ours_lock:
            if folder.absolute() in _ours or folder.is_symlink() or not folder.is_dir():
                continue  # ours, or none that an import makes
        owner = FileLock(str(folder / OWNER_LOCK))
        try:
            owner.acquire(timeout=0)
        except Timeout:
            continue  # its import runs
        except OSError:
            continue  # gone meanwhile, or not ours to open: left alone
        # released before the removal: Windows cannot delete a file that is open
        owner.release()
        size = _size_bytes(folder)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append((folder, size))
    return removed


def _say_removed(removed: list[tuple[Path, int]]) -> None:
    if removed:
        log.info("removed %d folder(s) (%.0f MB) left in %s by a livecam import that was "
                 "stopped midway", len(removed), sum(size for _, size in removed) / 1e6,
                 removed[0][0].parent)


def remove_abandoned(models_dir: Path, *, wait_s: float) -> None:
    """Remove the import folders in ``models_dir`` whose import is gone (see the module's
    docstring), saying so. Waits at most ``wait_s`` for ``.staging.lock``. Any thread."""
    if not models_dir.is_dir():
        return
    with holding(models_dir / _STAGING_LOCK, "starting an import", wait_s=wait_s):
        removed = _remove_abandoned(models_dir)
    _say_removed(removed)


@contextlib.contextmanager
def staging_folder(models_dir: Path, file_name: str, *, wait_s: float) -> Iterator[Path]:
    """A new empty folder in ``models_dir`` for one import of ``file_name``, owned (locked)
    until the ``with`` ends, then removed with what is in it. Removes abandoned ones first.
    ``models_dir`` must exist. Any thread."""
    from filelock import FileLock

    with holding(models_dir / _STAGING_LOCK, "starting an import", wait_s=wait_s):
        removed = _remove_abandoned(models_dir)
        folder = Path(tempfile.mkdtemp(dir=models_dir, prefix=f".{file_name}.", suffix=SUFFIX))
        owner = FileLock(str(folder / OWNER_LOCK))
        owner.acquire(timeout=0)  # no one else knows the folder yet
        with _ours_lock:
            _ours.add(folder.absolute())
    _say_removed(removed)
    try:
        yield folder
    finally:
        owner.release()  # first: Windows cannot delete a file that is open
        shutil.rmtree(folder, ignore_errors=True)
        with _ours_lock:
            _ours.discard(folder.absolute())


def remove_unused_partial(part: Path, download_lock: Path, name: str) -> None:
    """Remove ``part``, the partial download of model ``name`` that its caller knows no fetch
    will resume, unless a fetch holds ``download_lock`` (it writes the file). Any thread."""
    with held_if_free(download_lock) as free:
        if not free:
            return  # a fetch writes it
        try:
            size = part.stat().st_size
            part.unlink()
            log.info("removed %s (%.0f MB), a download cut short: model %s is installed "
                     "another way", part, size / 1e6, name)
        except OSError:
            pass  # gone meanwhile


def remove_unused_temp_files(path: Path, lock_path: Path) -> None:
    """Remove the temp files of ``path`` (a stamp, ``pins.json``) if its writers' lock
    ``lock_path`` is free; a held one is a writer at work (the next tidy removes them).
    Never waits. Any thread."""
    if temp_files(path.parent, path.name):  # first: no lock file made where none is needed
        with held_if_free(lock_path) as free:
            if free:
                remove_temp_files(path.parent, path.name)

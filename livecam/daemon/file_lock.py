"""A lock taken on an output file itself, and the identity (device, inode) of a file.

The lock dir's locks (:mod:`livecam.daemon.lock`) are keyed by a path, in a folder that
depends on the environment (``XDG_RUNTIME_DIR``): a hard link is another path, and a livecam
started from cron, ``su`` or a plain ``ssh`` session looks in another folder. Neither must let
a second livecam truncate a recording under way, so a ``file:`` output is also locked on the
file itself, which every name of it and every environment share
(:func:`livecam.core.fd_lock.try_lock`: ``flock`` on Linux and macOS, ``msvcrt.locking``, a
byte-range lock, on Windows). The system drops the lock when its
holder ends however it ends.

The file is opened without truncating it (created if missing), so a refused livecam has
written nothing to it; a file this lock created and that is still empty at release (the run
stopped before its sink wrote) is removed again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from livecam.core.fd_lock import try_lock, unlock

log = logging.getLogger(__name__)

#: Where the Windows lock sits: one byte far beyond any recording's end, because a Windows
#: byte-range lock also stops the sink's own writes to the bytes it covers.
_WINDOWS_LOCK_OFFSET = 1 << 62


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file ``path`` names (through symlinks): the same for every
    name of one file, hard links included; None where nothing can be stat'ed there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


class OnFileLock:
    """An exclusive lock on the regular file ``path`` (created if missing, never truncated).
    ``acquire`` returns False when another process holds it; True when held, or when there is
    nothing to lock (not a regular file, a folder that does not exist, no permission: the sink
    says what is wrong when it opens). ``release`` is idempotent. One thread for both."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._created: tuple[int, int] | None = None

    def acquire(self) -> bool:
        try:
            if not stat.S_ISREG(os.stat(self._path).st_mode):
                return True  # a device or pipe as output: nothing a lock would protect
        except (OSError, ValueError):
            pass
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
        try:
            try:
                fd = os.open(self._path, flags | os.O_CREAT | os.O_EXCL, 0o666)
                created = True
            except FileExistsError:
                fd = os.open(self._path, flags)
                created = False
        except (OSError, ValueError) as exc:
            log.debug("no lock on %s (%s): the sink reports it when it opens", self._path, exc)
            return True
        if not try_lock(fd, windows_offset=_WINDOWS_LOCK_OFFSET):
            os.close(fd)
            return False
        self._fd = fd
        if created:
            st = os.fstat(fd)
            self._created = (st.st_dev, st.st_ino)
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        created, self._created = self._created, None
        try:
            st = os.stat(self._path)
            if created == (st.st_dev, st.st_ino) and st.st_size == 0:
                self._path.unlink()  # ours, and nothing was written: as if never started
        except OSError:
            pass
        with contextlib.suppress(OSError):
            unlock(fd, windows_offset=_WINDOWS_LOCK_OFFSET)
        os.close(fd)

"""A non-blocking exclusive lock on an open file descriptor, the same call on every platform.

``flock`` on Linux and macOS (the whole file), ``msvcrt.locking`` on Windows (a one-byte
range at ``windows_offset``: a Windows byte-range lock also stops other writes to the byte it
covers, so a file its holder writes is locked far beyond its end). The system drops the lock
when its holder ends however it ends (``kill -9`` included), so a lock that can be taken has no
live holder. Used on an output file itself (:mod:`livecam.daemon.file_lock`) and on the marker
of a session's photo folder (:mod:`livecam.remote.photo_folders`); the waited-for locks between
processes are :mod:`livecam.core.locks`.
"""

from __future__ import annotations

import os
import sys

if sys.platform == "win32":
    import msvcrt

    def try_lock(fd: int, *, windows_offset: int = 0) -> bool:
        """Take the lock on ``fd`` if no other holder has it: True when taken, False when held
        elsewhere. Moves ``fd``'s position on Windows. Any thread."""
        os.lseek(fd, windows_offset, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def unlock(fd: int, *, windows_offset: int = 0) -> None:
        """Release what :func:`try_lock` took on ``fd`` (the same ``windows_offset``)."""
        os.lseek(fd, windows_offset, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def try_lock(fd: int, *, windows_offset: int = 0) -> bool:
        """Take the lock on ``fd`` if no other holder has it: True when taken, False when held
        elsewhere (``windows_offset`` is for Windows only). Any other failure (no locks on
        this file system) raises :class:`OSError`. Any thread."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(fd: int, *, windows_offset: int = 0) -> None:
        """Release what :func:`try_lock` took on ``fd``."""
        fcntl.flock(fd, fcntl.LOCK_UN)


__all__ = ["try_lock", "unlock"]

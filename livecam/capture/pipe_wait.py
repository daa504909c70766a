"""Waiting for a pipe's first bytes without blocking for good.

Opening a FIFO for reading blocks until a writer opens it, and FFmpeg's probe then blocks
until the writer writes: a ``daemon`` whose input pipe never writes would hang in ``av.open``
on the main thread, serve no API and ignore SIGTERM. :class:`PipeWaiter`
opens the pipe without waiting (``O_NONBLOCK``) and waits for it to become readable in
slices the caller chooses, so the caller can give up or go on meanwhile. FFmpeg then reads
the same descriptor (``pipe:N``), switched back to blocking reads.
"""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path


class PipeWaiter:
    """One pipe (a FIFO, ``/dev/stdin``) opened for reading without waiting for its writer.

    :meth:`wait_readable` may be called from one thread at a time; :meth:`close` is
    idempotent. Where a pipe cannot be opened this way (Windows, a socket), ``fd`` stays
    None and :meth:`wait_readable` says True at once: the caller opens the path as before.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self.fd: int | None = None
        self._unsupported = False

    def _open(self) -> None:
        if self.fd is not None or self._unsupported:
            return
        if sys.platform == "win32":
            self._unsupported = True
            return
        try:
            self.fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            self._unsupported = True  # a socket, or no such path: av.open says why

    def wait_readable(self, timeout_s: float | None) -> bool:
        """True once the pipe holds data or its writer has come and gone (a read will not
        wait for a writer); False after ``timeout_s`` (None: no limit) without that."""
        self._open()
        if self.fd is None:
            return True
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        return bool(ready)

    def blocking_fd(self) -> int | None:
        """The descriptor switched to blocking reads (for FFmpeg's ``pipe:N``); None where
        the pipe could not be opened ahead (open the path instead)."""
        self._open()
        if self.fd is None:
            return None
        if sys.platform != "win32":
            os.set_blocking(self.fd, True)
        return self.fd

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

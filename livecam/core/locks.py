"""File locks between livecam processes: waited for visibly and for a bounded time, or taken
only if free.

The locks are ``filelock`` locks (``flock`` on Linux and macOS, a byte-range lock on Windows),
which the system drops when their holder dies however it dies (``kill -9`` included). So a
lock that can be taken has no live writer: what is found under it that only writers make
(temp files, import folders, partial downloads) a killed one left, and tidying takes the lock
without waiting (:func:`held_if_free`): a lock held now is tidied at the next start.

A wait (:func:`holding`) that lasts past :data:`SAY_WAITING_AFTER_S` logs one line naming what
the other process does and the limit; one that lasts past the limit raises an error that says
what to do. A lock that is never released is a process that hangs, or a lock that a network
file system keeps for a client that is gone: those would otherwise be waited for forever.
Used by the model store and the engine cache (:mod:`livecam.engines.store_locks`) and the
control API's token (:mod:`livecam.control.auth`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from livecam.core.errors import LivecamError

log = logging.getLogger(__name__)

#: How long a wait for another process's lock stays silent, s: a rename or a stamp takes
#: milliseconds, and a line for each of those would only be noise.
SAY_WAITING_AFTER_S = 1.0


@contextlib.contextmanager
def holding(lock_path: Path, doing: str, *, wait_s: float, error: type[LivecamError],
            knob: str | None = None, logger: logging.Logger = log) -> Iterator[None]:
    """Hold the file lock ``lock_path`` (between processes, and between threads of one).

    ``doing`` says what its holder does, after "another livecam process is" ("writing or
    checking model x"). Waits at most ``wait_s`` seconds (the setting ``knob``, if one sets
    it), saying so after :data:`SAY_WAITING_AFTER_S` (on ``logger``: the caller's, so that
    the line names the part that waits); then raises ``error``. Any thread.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=min(SAY_WAITING_AFTER_S, wait_s))
    except Timeout:
        logger.warning("another livecam process is %s: waiting for it to finish (at most %g s%s)",
                    doing, wait_s, f", {knob}" if knob else "")
        try:
            lock.acquire(timeout=max(0.0, wait_s - SAY_WAITING_AFTER_S))
        except Timeout:
            raise error(
                f"gave up after {wait_s:g} s: another livecam process is still {doing} (it "
                f"holds {lock_path}). Let it finish, or stop it, and run again"
                f"{f' (raise {knob} to wait longer)' if knob else ''}; if no livecam is running "
                "on any computer "
                f"that shares this folder, the lock is stale: delete {lock_path} and run again"
            ) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def held_if_free(lock_path: Path) -> Iterator[bool]:
    """Hold the file lock ``lock_path`` if no one holds it now: yields True, holding it; or
    False at once (another process or thread holds it, or it cannot be opened), for what can
    wait for the next start. Any thread."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()

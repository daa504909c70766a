"""A resource shared by several users: the first user's ``acquire`` opens it, the last user's
release closes it.

Used by the GPU swap hub (:class:`~livecam.gpupipe.hub.GpuSwapHub`) and the shared face
networks (:class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`), whose streams each
acquire on open and release on close.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


class SharedOpen:
    """The count of a shared resource's users, kept under its owner's ``lock`` (a
    ``threading.Lock`` or ``RLock``: the owner's other methods take the same lock, so a
    count, an open and a close never interleave with them).

    :meth:`acquire` counts a user and opens the resource when it is not open; an open that
    raises leaves the count as it was. :meth:`releasing` counts one user off (never below 0)
    and says whether none is left; the owner closes inside its block, under the lock."""

    def __init__(self, lock: contextlib.AbstractContextManager[Any]) -> None:
        self._lock = lock
        self._users = 0

    @property
    def users(self) -> int:
        """Users now (read under the lock for a count that holds)."""
        return self._users

    def acquire(self, is_open: Callable[[], bool], open_: Callable[[], None]) -> None:
        """Count a user; when ``is_open()`` is false, call ``open_()`` (under the lock, so a
        second user waits for the first one's open). ``open_``'s error propagates, the user
        uncounted."""
        with self._lock:
            self._users += 1
            if is_open():
                return
            try:
                open_()
            except BaseException:
                self._users -= 1
                raise

    @contextlib.contextmanager
    def releasing(self) -> Iterator[bool]:
        """Under the lock, count one user off; yields True when none is left (the caller
        closes the resource in the block, still under the lock)."""
        with self._lock:
            self._users = max(0, self._users - 1)
            yield self._users == 0

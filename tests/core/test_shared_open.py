"""The reference-counted open: the first user opens, the last one's release closes, and an open
that fails counts no user."""

from __future__ import annotations

import threading

import pytest

from livecam.core.shared_open import SharedOpen


class _Resource:
    """A resource that counts its opens and closes, closed the way its owner closes it: inside
    ``releasing`` when no user is left."""

    def __init__(self, fail_opens: int = 0) -> None:
        self.lock = threading.Lock()
        self.refs = SharedOpen(self.lock)
        self.is_open = False
        self.opens = self.closes = 0
        self.fail_opens = fail_opens

    def _open(self) -> None:
        self.opens += 1
        if self.fail_opens:
            self.fail_opens -= 1
            raise OSError("the device is gone")
        self.is_open = True

    def acquire(self) -> None:
        self.refs.acquire(lambda: self.is_open, self._open)

    def release(self) -> None:
        with self.refs.releasing() as last:
            assert self.lock.locked()  # the owner closes under its lock
            if last:
                self.is_open = False
                self.closes += 1


def test_the_first_user_opens_once_and_the_last_release_closes() -> None:
    res = _Resource()
    res.acquire()
    res.acquire()
    res.acquire()
    assert (res.opens, res.refs.users) == (1, 3)
    res.release()
    res.release()
    assert res.is_open and res.closes == 0
    res.release()
    assert not res.is_open and res.closes == 1 and res.refs.users == 0
    res.release()  # one release too many: the count stays at 0
    assert res.refs.users == 0
    res.acquire()  # a new first user opens again
    assert res.opens == 2 and res.is_open and res.refs.users == 1


def test_a_failed_open_counts_no_user_and_the_next_acquire_opens() -> None:
    res = _Resource(fail_opens=1)
    with pytest.raises(OSError, match="the device is gone"):
        res.acquire()
    assert res.refs.users == 0 and not res.is_open
    res.acquire()
    assert res.refs.users == 1 and res.is_open and res.opens == 2
    res.release()
    assert res.closes == 1


def test_a_reentrant_lock_may_be_held_by_the_owner_around_a_count() -> None:
    """The GPU swap hub holds its ``RLock`` in methods that may count users."""
    lock = threading.RLock()
    refs = SharedOpen(lock)
    with lock:
        refs.acquire(lambda: False, lambda: None)
        with refs.releasing() as last:
            assert last

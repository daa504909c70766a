"""A one-item mailbox between two threads: the newest item wins, or the producer waits.

This is what bounds latency: each hop between threads holds at most one item. With
``policy="latest"`` (live sources) ``put`` replaces an item that was not taken yet and counts it
as dropped, so a slow consumer never builds a backlog. With ``policy="block"`` (files processed
offline) ``put`` waits until the consumer has taken the previous item, so nothing is dropped.
Order is preserved either way: an item is never handed out after a newer one.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

Policy = Literal["latest", "block"]


class MailboxClosed(Exception):
    """Raised by ``get`` once the mailbox is closed and empty: the producer is done."""


class Mailbox(Generic[T]):
    """Holds at most one item. Any thread may call any method."""

    def __init__(self, *, policy: Policy = "latest") -> None:
        if policy not in ("latest", "block"):
            raise ValueError(f"policy must be 'latest' or 'block', got {policy!r}")
        self._policy = policy
        self._cond = threading.Condition()
        self._item: T | None = None
        self._has_item = False
        self._closed = False
        self.dropped = 0

    def put(self, item: T, *, timeout_s: float | None = None) -> bool:
        """Hand over ``item``. Returns False if the mailbox is closed (or, when blocking, if
        ``timeout_s`` passed before the previous item was taken)."""
        with self._cond:
            if self._policy == "block":
                deadline = None if timeout_s is None else time.monotonic() + timeout_s
                while self._has_item and not self._closed:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining)
            if self._closed:
                return False
            if self._has_item:
                self.dropped += 1
            self._item = item
            self._has_item = True
            self._cond.notify_all()
            return True

    def get(self, timeout_s: float | None = None) -> T | None:
        """Take the item, waiting up to ``timeout_s`` (None = forever). Returns None on timeout;
        raises :class:`MailboxClosed` when closed and empty."""
        with self._cond:
            if not self._has_item and not self._closed:
                self._cond.wait_for(lambda: self._has_item or self._closed, timeout_s)
            if self._has_item:
                item = self._item
                self._item = None
                self._has_item = False
                self._cond.notify_all()
                return item
            if self._closed:
                raise MailboxClosed
            return None

    def close(self) -> None:
        """No more items will come; wakes every waiting thread. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

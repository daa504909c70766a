"""How a requested reload ended, for the one who asked (``livecam ctl reload``).

Reloads run on a thread of their own, after the command that asked for them has been applied,
so the command's :class:`~livecam.core.commands.Ticket` cannot say how they ended. A
:class:`ReloadResult` rides on the :class:`~livecam.core.commands.Reload` command: each
stream that takes the command joins it (``begin``) before the command's ticket resolves, and
reports once its reload is over (``finish``), or as soon as its config file turned out not to
load (the rest of that reload, the identity library, goes on, but the answer is known).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class ReloadResult:
    """The outcome of one reload request over every stream it went to. Any thread may call
    any method; callbacks run on the thread that made the result done (a reload thread), so
    they must only hand over (``loop.call_soon_threadsafe``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = 0
        self._errors: list[str] = []
        self._messages: list[str] = []
        self._callbacks: list[Callable[[], None]] = []

    def begin(self) -> None:
        """One more stream reloads for this request (the pipeline thread, as it applies the
        :class:`~livecam.core.commands.Reload` command)."""
        with self._lock:
            self._pending += 1

    def finish(self, *, error: str | None, message: str) -> None:
        """One stream's reload is over: ``error`` (one line) says why it did not take
        effect, None when it did; ``message`` (one line) says what it did. Once per
        :meth:`begin`."""
        with self._lock:
            self._pending -= 1
            if error is not None and error not in self._errors:
                self._errors.append(error)
            if message not in self._messages:
                self._messages.append(message)
            callbacks = self._callbacks if self._pending <= 0 else []
            if callbacks:
                self._callbacks = []
        for callback in callbacks:
            callback()

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once every stream that began has finished: at once if none is
        pending. Register it after the command's ticket resolved (every stream has begun)."""
        with self._lock:
            if self._pending > 0:
                self._callbacks.append(callback)
                return
        callback()

    @property
    def done(self) -> bool:
        with self._lock:
            return self._pending <= 0

    @property
    def error(self) -> str | None:
        """Why the reload did not (fully) take effect, one line; None if it did."""
        with self._lock:
            return "; ".join(self._errors) or None

    @property
    def message(self) -> str:
        """What the reload did, one line (each different stream's line, joined)."""
        with self._lock:
            return "; ".join(self._messages)

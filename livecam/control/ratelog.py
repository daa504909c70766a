"""Log lines that a client can cause, at most one per interval, with a count.

Any local program can send the control API a request that fails (a wrong token, a header
that makes a handler fail): one log line per request lets it flood the log (thousands of
lines a second over one keep-alive connection) and spend the frame threads' CPU on logging.
:class:`RateLimitedLog` writes the first such event at once and folds the next ones of the
following ``interval_s`` into the next line it writes, which says how many there were.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


def printable(text: str, limit: int = 200) -> str:
    """``text`` (a client's path, say) safe for one log line: ASCII (anything else, lone
    surrogates from bytes that are not UTF-8 included, as backslash escapes) and at most
    ``limit`` characters."""
    safe = text.encode("ascii", "backslashreplace").decode("ascii")
    return safe if len(safe) <= limit else safe[:limit] + "..."


class RateLimitedLog:
    """At most one line per ``interval_s`` on ``logger`` at ``level``.

    :meth:`event` counts one event; the first of an interval is written with the count of
    events since the last line written (itself included). :meth:`flush` writes the ones
    still uncounted (at shutdown). ``clock`` is monotonic, in seconds. Not thread-safe: one
    thread (the API's event loop) calls it.
    """

    def __init__(self, logger: logging.Logger, what: str, *, level: int = logging.WARNING,
                 interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._what = what
        self._level = level
        self._interval_s = interval_s
        self._clock = clock
        self._t_last: float | None = None
        self._pending = 0
        self.total = 0

    def event(self, detail: str) -> None:
        """Count one event (``detail``: a one-line reason, never a secret)."""
        self.total += 1
        self._pending += 1
        now = self._clock()
        if self._t_last is None or now - self._t_last >= self._interval_s:
            self._write(detail, now)

    def flush(self) -> None:
        """Write a line for events not written yet, if any."""
        if self._pending:
            self._write("", self._clock())

    def _write(self, detail: str, now: float) -> None:
        count, self._pending = self._pending, 0
        since = "" if self._t_last is None else f" in the last {now - self._t_last:.1f} s"
        self._t_last = now
        tail = f" (latest: {detail})" if detail else ""
        self._logger.log(self._level, "%s: %d%s%s", self._what, count, since, tail)

"""Ctrl-C (SIGINT) and SIGTERM end ``livecam run`` through its ``stop``, whatever signal
handling the process inherited.

Two ways a run would otherwise not end properly: a process started as a background job of a
non-interactive shell (``livecam run … &`` in a script, a CI runner) inherits SIGINT
*ignored*, and Python then installs no KeyboardInterrupt handler: Ctrl-C and ``kill -INT``
would do nothing and the run go on for ever. And SIGTERM's default action ends the process at
once, without closing the output: a recording would lose its last seconds (the MP4 fragment
being written). Inside :func:`stop_on_signals` both raise :class:`StopSignal` (a
``KeyboardInterrupt``) on the main thread, so the run unwinds through its ``stop`` exactly
as after Ctrl-C in a terminal. (``livecam daemon`` has its own handlers: its signals only set
a flag that its main loop polls.)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class StopSignal(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``str()`` is the signal's name."""


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """For the block, SIGINT and SIGTERM raise :class:`StopSignal` on the main thread: the
    first one only, so a second Ctrl-C does not cut the stop short and leave a recording
    half-written (SIGKILL still ends it). The handlers before the block are put back after
    it. Off the main thread (a test calling ``run`` in a thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if raised:
            return  # stopping already
        raised.append(signal.Signals(signum).name)
        raise StopSignal(raised[0])

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

"""The daemon's main loop: run the app until SIGTERM/SIGINT, reload on SIGHUP; its exit.

Signal handlers only set a flag or queue a command (they run on the main thread between
bytecodes and must not block); the main thread polls the flag every 50 ms and then stops the
app with a deadline. While the app is still being built or started, a stop signal ends that
at once instead. Where a stop's time goes is logged (``stop timings``): the app itself
stops in about 0.1 s; tearing down the interpreter afterwards (some 1,400 modules: mediapipe,
TFLite, OpenCV, PyAV, SciPy...) took another 0.3-1.1 s on a loaded 2-core machine, which
:func:`exit_without_teardown` skips, so SIGTERM ends the process within a second.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

from livecam.app import App, StreamSet
from livecam.core.commands import Reload

log = logging.getLogger(__name__)

_POLL_S = 0.05


class _StopSignal(BaseException):
    """Raised by the stop signal's handler into the main thread while the daemon builds,
    starts or runs its app: a start (loading models can take seconds on a busy machine)
    unwinds, freeing what it opened, instead of finishing first; a run's wait ends at once
    rather than at its next poll (up to 50 ms later)."""


def serve(build: Callable[[], App | StreamSet], *, stop_timeout_s: float = 0.7,
          exiting: bool = False) -> str:
    """Build and start an app (or a set of streams) with ``build`` and run it until a stop
    signal or its end; returns why it stopped (``"SIGTERM"``, ``"SIGINT"``, ``"finished"``).
    A stop signal while it is still starting ends the start at once. ``exiting``: the
    process ends without teardown after this returns (see ``App.stop``). Main thread only
    (it installs handlers)."""
    stop_reason: list[str] = []
    stop = threading.Event()
    t_signal_ns: list[int] = []
    interruptible = [True]  # building, starting or waiting: not yet stopping
    starting = [True]
    app: App | StreamSet | None = None

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        t_signal_ns.append(time.perf_counter_ns())
        stop_reason.append(signal.Signals(signum).name)
        stop.set()
        if interruptible[0]:
            interruptible[0] = False  # once: a second signal must not break the unwinding
            raise _StopSignal

    def on_hup(_signum: int, _frame: FrameType | None) -> None:
        if app is not None:
            log.info("SIGHUP: reloading the config and the identity library")
            app.commands.put(Reload())

    previous = {sig: signal.signal(sig, on_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    if hasattr(signal, "SIGHUP"):
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hup)
    try:
        try:
            app = build()
            app.start()
            starting[0] = False
            while not stop.is_set() and not app.wait(_POLL_S):
                pass
            interruptible[0] = False  # finished: a signal from here on only sets ``stop``
        except _StopSignal:
            if starting[0]:
                log.info("%s while starting: not starting", stop_reason[0])
    finally:
        interruptible[0] = starting[0] = False
        if app is not None:
            t_stop_ns = time.perf_counter_ns()
            # idempotent: also frees a start cut short
            app.stop(timeout_s=stop_timeout_s, exiting=exiting)
            if t_signal_ns:
                timings = {"to_stop": (t_stop_ns - t_signal_ns[0]) / 1e6, **app.stop_timings_ms,
                           "total": (time.perf_counter_ns() - t_signal_ns[0]) / 1e6}
                log.info("stop timings (ms): %s",
                         " ".join(f"{k}={v:.0f}" for k, v in timings.items()),
                         extra={"timings_ms": {k: round(v, 1) for k, v in timings.items()}})
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    reason = stop_reason[0] if stop_reason else "finished"
    if app is not None:
        log.info("stopped (%s): %s", reason, app.summary().line())
    else:
        log.info("stopped (%s) before the start completed", reason)
    if app is not None and app.output_error is not None and not stop_reason:
        raise app.output_error
    return reason


def exit_without_teardown(code: int) -> NoReturn:
    """End the process with ``code`` now: run the atexit handlers (they flush the logs and
    drain the captured stderr) but not the interpreter's module teardown. Main thread, only
    after :func:`serve` returned (the app has closed its sink, so recordings are complete,
    and released its locks); threads still running are logged and then ended with it. On
    Linux the kernel unmaps the memory after the exit is seen, not before
    (:mod:`livecam.daemon.memory_handoff`)."""
    running = [t.name for t in threading.enumerate()
               if not t.daemon and t is not threading.main_thread()]
    if running:
        log.warning("exiting while threads still run: %s", ", ".join(running))
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if sys.platform == "linux":
        from livecam.daemon.memory_handoff import exit_handing_off_memory

        exit_handing_off_memory(code)
    os._exit(code)

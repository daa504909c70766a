"""The daemon's main loop: run the app until SIGTERM/SIGINT, reload on SIGHUP.

Signal handlers only set a flag or queue a command (they run on the main thread between
bytecodes and must not block); the main thread polls the flag every 50 ms and then stops the
app with a deadline, so SIGTERM ends the process well within a second.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from livecam.app import App
from livecam.core.commands import Reload

log = logging.getLogger(__name__)

_POLL_S = 0.05


def serve(app: App, *, stop_timeout_s: float = 0.7) -> str:
    """Start ``app`` and block until a stop signal or the app ends; returns why it stopped
    (``"SIGTERM"``, ``"SIGINT"``, ``"finished"``). Main thread only (it installs handlers)."""
    stop_reason: list[str] = []
    stop = threading.Event()

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        stop_reason.append(signal.Signals(signum).name)
        stop.set()

    def on_hup(_signum: int, _frame: FrameType | None) -> None:
        log.info("SIGHUP: reloading the config and the identity library")
        app.commands.put(Reload())

    previous = {sig: signal.signal(sig, on_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    if hasattr(signal, "SIGHUP"):
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hup)
    try:
        app.start()
        try:
            while not stop.is_set() and not app.wait(_POLL_S):
                pass
        finally:
            app.stop(timeout_s=stop_timeout_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    reason = stop_reason[0] if stop_reason else "finished"
    log.info("stopped (%s)", reason)
    if app.output_error is not None and not stop_reason:
        raise app.output_error
    return reason

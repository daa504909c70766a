"""A stop signal that lands while ``livecam run``/``daemon`` is starting its threads.

``serve`` and ``run_to_end`` turn SIGTERM/SIGINT into an exception in the main thread, which
can land between two thread starts of ``App.start``; the stop that follows must end what did
start and skip what did not. CI's fast tier once hit it (``test_service``'s SIGTERM arrived
before the output thread started): ``stop`` raised "cannot join thread before it is started".
Here the signal's exception is raised by the output thread's start itself, deterministically.
"""

from __future__ import annotations

import pytest

from livecam.app import App
from livecam.capture.sources import SyntheticSource
from livecam.config import Config
from livecam.output.sinks import NullSink
from livecam.output.thread import OutputThread


class _Signal(Exception):
    """Stands in for the stop signal's exception (``serve``'s ``_StopSignal``)."""


@pytest.mark.parametrize("exiting", [False, True])
def test_a_stop_signal_before_the_output_thread_starts_stops_cleanly(
        fast_config: Config, monkeypatch: pytest.MonkeyPatch, exiting: bool) -> None:
    def signal_arrives(self: OutputThread) -> None:
        raise _Signal

    monkeypatch.setattr(OutputThread, "start", signal_arrives)
    app = App(fast_config, source=SyntheticSource(width=64, height=48, fps=30),
              sink=NullSink(), stages=[])
    with pytest.raises(_Signal):
        app.start()
    app.stop(timeout_s=5, exiting=exiting)  # raised RuntimeError before
    assert "output" in app.stop_timings_ms  # it ran to its end

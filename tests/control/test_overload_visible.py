"""Overload is visible (issue 10 item 7): with a stage slowed to twice the frame interval, the
warning shows in the log, the status line, /api/status and /metrics. (The panel's banner is
checked in test_panel.py.) Waits on the monitor's event, never on a fixed sleep.

"Within 2 s" is checked on the monitor's own clock in tests/core/test_overload.py (the 1 s
judging window plus one tick); here the wall time is printed, not asserted: on a loaded host
the threads that tick and log run late for reasons that are not livecam's."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from livecam.config import Config
from livecam.core.stage import StageBase
from livecam.core.types import Packet
from tests.control.conftest import NAMES, PhotoCatalog, Running, start_running

FRAME_S = 1 / 30


class SlowStage(StageBase):
    """Takes twice the frame interval per frame (as a too-heavy swap would), and notes when
    the first frame came."""

    name = "slow"

    def __init__(self) -> None:
        self.t_first = 0.0

    def process(self, packet: Packet) -> Packet:
        if not self.t_first:
            self.t_first = time.monotonic()
        time.sleep(2 * FRAME_S)
        return packet


class Records(logging.Handler):
    """Keeps log records; ``wait_for(text)`` blocks until one contains ``text``."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self.t_received: list[float] = []
        self._cond = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._cond:
            self.records.append(record)
            self.t_received.append(time.monotonic())
            self._cond.notify_all()

    def wait_for(self, text: str, timeout_s: float) -> float | None:
        """The monotonic time the first record with ``text`` arrived, or None."""
        def found() -> float | None:
            return next((t for r, t in zip(self.records, self.t_received, strict=True)
                         if text in r.getMessage()), None)
        with self._cond:
            self._cond.wait_for(lambda: found() is not None, timeout_s)
            return found()


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def slow_app(fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray,
             records: Records) -> Iterator[tuple[Running, SlowStage]]:
    stage = SlowStage()
    config = dataclasses.replace(fast_config, pipeline=dataclasses.replace(
        fast_config.pipeline, status_interval_s=1.0, threads=1))
    r = start_running(config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES), stages=[stage])
    try:
        yield r, stage
    finally:
        r.app.stop()


def test_a_slow_stage_is_reported_within_2_s(slow_app: tuple[Running, SlowStage],
                                             records: Records) -> None:
    running, stage = slow_app
    assert running.app.overload.wait_active(60.0), "no overload reported"
    t_warning = records.wait_for("pipeline overloaded", 60.0)
    t_line = records.wait_for("OVERLOADED", 60.0)
    assert t_warning is not None and t_line is not None
    print(f"overload warning {t_warning - stage.t_first:.2f} s after the first slow frame, "
          f"status line {t_line - stage.t_first:.2f} s")
    line = next(r for r in records.records if "OVERLOADED" in r.getMessage())
    assert line.levelno == logging.WARNING and "dropped" in line.getMessage()

    status = running.json("/api/status")
    assert status["overload"]["active"] is True and status["overload"]["since_s"] >= 0
    assert "dropped" in status["overload"]["reason"]
    assert status["overload"]["drop_share"] > 0.2
    _, body, _ = running.call("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["livecam_overloaded"].samples[0].value == 1.0

    # the degradation: frames are dropped (newest wins, tests/test_app.py checks that the
    # stage gets the newest), counted, and the run summary says for how long
    running.app.stop()
    summary = running.app.summary()
    assert summary.drop_share > 0.2 and summary.overloaded_s > 0
    assert "overloaded for" in summary.line()
    print(summary.line())

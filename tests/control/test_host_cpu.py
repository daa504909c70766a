"""Host CPU per frame per stream (issue 41 item 4): the CPU time of the stream's own threads
(``time.thread_time_ns``), in the status line's snapshot, /api/status and /metrics. A stage
that spends a known CPU time per frame (measured on its own thread's CPU clock, so the host's
load does not change it) shows at least that much per frame; waits on events, not sleeps."""

from __future__ import annotations

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

BURN_MS = 4.0
FRAMES = 20


class BurnStage(StageBase):
    """Spends ``BURN_MS`` of its thread's CPU time on each frame; ``done`` after FRAMES."""

    name = "burn"

    def __init__(self) -> None:
        self.frames = 0
        self.done = threading.Event()

    def process(self, packet: Packet) -> Packet:
        end = time.thread_time_ns() + int(BURN_MS * 1e6)
        x = 0
        while time.thread_time_ns() < end:
            x += 1
        self.frames += 1
        if self.frames >= FRAMES:
            self.done.set()
        return packet


@pytest.fixture
def burning(fast_config: Config, tmp_path: Path,
            astronaut_bgr: np.ndarray) -> Iterator[tuple[Running, BurnStage]]:
    stage = BurnStage()
    r = start_running(fast_config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES), stages=[stage])
    try:
        yield r, stage
    finally:
        r.app.stop()


def test_the_streams_cpu_per_frame_is_in_the_status_and_metrics(
        burning: tuple[Running, BurnStage]) -> None:
    running, stage = burning
    assert stage.done.wait(120), "the stage did not get its frames"
    snapshot = running.app.metrics.snapshot()  # what the status line prints
    assert BURN_MS <= snapshot.cpu_ms_per_frame < 1000, snapshot
    assert f"cpu {snapshot.cpu_ms_per_frame:.1f} ms/frame" in snapshot.status_line()
    status = running.json("/api/status")
    cpu = status["host_cpu"]
    assert cpu["ms_per_frame"] is not None and cpu["ms_per_frame"] >= BURN_MS, cpu
    assert cpu["percent_of_core"] > 0
    _, body, _ = running.call("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    seconds = families["livecam_host_cpu_seconds"].samples[0].value
    assert seconds >= FRAMES * BURN_MS / 1000

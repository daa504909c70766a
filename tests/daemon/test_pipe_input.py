"""An input pipe that never writes (issue 39 item 11): the run must not hang opening it.

Before, opening the FIFO (and FFmpeg's probe) blocked the main thread in ``av.open``: the
daemon served no API, sent no frame and ignored SIGTERM for 20 s. Now the control API comes
up, the output sends the idle frame, frames follow once the pipe writes, and SIGTERM ends
it. How fast it exits is measured by ``scripts/bench_stop.py``, not asserted here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from livecam.app import build_app
from livecam.config import Config
from tests.daemon.conftest import Daemon


def _hold_open_without_writing(fifo: Path) -> subprocess.Popen[bytes]:
    """A writer that opens the pipe and never writes (the hostile case: FFmpeg's probe then
    waits in read(), not in open())."""
    return subprocess.Popen([sys.executable, "-c",
                             "import sys, time; f = open(sys.argv[1], 'wb'); time.sleep(600)",
                             str(fifo)])


@pytest.mark.slow
def test_daemon_with_a_silent_pipe_serves_the_api_and_stops_on_sigterm(
        new_daemon: Callable[[], Daemon]) -> None:
    d = new_daemon()
    fifo = d.root / "in.fifo"
    os.mkfifo(fifo)
    writer = _hold_open_without_writing(fifo)
    try:
        d.start("--input", f"file:{fifo}", "--output", "null", record=False)
        status = d.wait_ready(min_frames=5)  # the API answers, the idle frame goes out
        assert status["frames"]["captured"] == 0
        assert d.proc is not None
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        code = d.proc.wait(10)  # generous for a loaded host; bench_stop.py has the figure
        assert code == 0, d.stderr()
        assert time.monotonic() - t0 < 10
        stopped = [json.loads(line) for line in d.stderr().splitlines()
                   if line.startswith("{") and "stopped (SIGTERM)" in line]
        assert stopped, d.stderr()
    finally:
        writer.kill()
        writer.wait()


def _write_clip_into(fifo: Path, n: int) -> None:
    import av

    with av.open(str(fifo), "w", format="mpegts") as container:
        stream = container.add_stream("mpeg2video", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for k in range(n):
            image = np.full((48, 64, 3), 40 + 3 * k, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def test_run_starts_before_its_pipe_writes_and_takes_its_frames_later(
        tmp_path: Path, fast_config: Config) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    sent: list[float] = []
    got_idle = threading.Event()
    app = build_app(fast_config, input_spec=f"file:{fifo}", output_spec="null")
    app._on_sent = lambda packet, image: (sent.append(float(image.mean())),
                                          got_idle.set() if packet is None else None)
    app.start()  # before: blocked here until a writer came and wrote
    try:
        assert got_idle.wait(60), "no idle frame while the pipe is silent"
        assert max(sent) == 0.0  # the idle frame, never stale pixels
        writer = threading.Thread(target=_write_clip_into, args=(fifo, 30), daemon=True)
        writer.start()
        assert app.wait(120), "the run did not end with its pipe"
        writer.join(10)
    finally:
        app.stop()
    assert app.metrics.counters()["captured"] == 30
    assert max(sent) > 0.0


def test_the_ordinary_end_of_a_pipe_is_info_not_a_warning(
        tmp_path: Path, fast_config: Config, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 39 item 20: a pipe that ended (with advanced.capture.loop on, the default) was a
    WARNING as if something had failed."""
    import logging

    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=_write_clip_into, args=(fifo, 30), daemon=True)
    writer.start()
    app = build_app(fast_config, input_spec=f"file:{fifo}", output_spec="null")
    with caplog.at_level(logging.INFO, logger="livecam.capture"):
        app.start()
        try:
            assert app.wait(120), "the run did not end with its pipe"
        finally:
            app.stop()
    records = [r for r in caplog.records if r.name.startswith("livecam.capture")]
    assert any("pipe that has ended" in r.getMessage() and r.levelno == logging.INFO
               for r in records), [r.getMessage() for r in records]
    assert not [r for r in records if r.levelno >= logging.WARNING]

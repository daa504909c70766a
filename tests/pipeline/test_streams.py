"""Several streams in one process: `livecam run` with input/output pairs, independence (one
stream's stall or failure never holds another's output). Their control (API, ctl, panel) is
``test_stream_control.py``.

Real threads, real sources and sinks (synthetic and image inputs, file and null outputs); the
stages are small test stages where a stall or an error has to be made on purpose (the real
CPU and GPU stages run per stream through the same ``App``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from livecam.app import App, build_streams
from livecam.capture.sources import SyntheticSource
from livecam.config import Config, load_config
from livecam.core.stage import StageBase
from livecam.core.types import Packet, RuntimeState
from livecam.output.sinks import NullSink
from livecam.pipeline.streams import StreamSet
from tests.control.conftest import NAMES


def livecam(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def frames_in(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


QUIET = ["--set", "control.api=false", "--set", "control.hotkeys=false",
         "--set", "advanced.pipeline.status_interval_s=0"]


def test_run_pairs_each_input_with_its_output(tmp_path: Path) -> None:
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    result = livecam("run", "--input", "synthetic:160x120", "--output", f"file:{a}",
                     "--input", "synthetic:320x240", "--output", f"file:{b}",
                     "--frames", "12", "--set", "capture.fps=60", *QUIET)
    assert result.returncode == 0, result.stderr
    assert frames_in(a) == 12 and frames_in(b) == 12
    with av.open(str(a)) as ca, av.open(str(b)) as cb:  # each input went to its own output
        assert (ca.streams.video[0].width, cb.streams.video[0].width) == (160, 320)
    assert "stream 0:" in result.stderr and "stream 1:" in result.stderr
    # the start's lines say which stream they are about (16 alike lines helped nobody)
    for k, size in ((0, "160x120"), (1, "320x240")):
        assert f"stream {k}: running: {size}" in result.stderr, result.stderr


def test_streams_from_the_config(tmp_path: Path) -> None:
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    streams = (f'streams=[{{input: "synthetic:160x120", output: "file:{a}"}}, '
               f'{{input: "synthetic:200x100", output: "file:{b}"}}]')
    result = livecam("run", "--frames", "6", "--set", "capture.fps=60", "--set", streams,
                     *QUIET)
    assert result.returncode == 0, result.stderr
    assert frames_in(a) == 6 and frames_in(b) == 6


@pytest.mark.parametrize(("args", "message"), [
    (["--input", "synthetic", "--input", "synthetic", "--output", "null"],
     "2 --input and 1 --output: give one --output per --input"),
    (["--input", "synthetic", "--output", "file:{out}", "--input", "synthetic:64x64",
      "--output", "file:{out}"], "is named by two streams"),
    (["--set", 'streams=[{input: synthetic, out: "null"}]'],
     "streams[0]: expected the keys input and output"),
    # was a traceback (ValueError from StreamSet) after every stream had been built
    (["--input", "synthetic", "--output", "window", "--input", "synthetic:64x64", "--output",
      "window"], "output window is named by two streams (0 and 1): one preview window"),
    # a careless config (a list pasted many times, a generated one) must not start streams
    # until memory runs out: 64 streams took 170 s to start and 7.6 GB on this CPU
    (["--set", "advanced.pipeline.max_streams=2", *["--input", "synthetic", "--output",
                                                    "null"] * 3],
     "3 streams (3 --input/--output pairs) in one process, more than advanced.pipeline.max_streams "
     "(2)"),
    (["--set", "streams=[" + ", ".join(['{input: "synthetic:64x64", output: "null"}'] * 65)
      + "]"], "65 streams (config streams) in one process, more than advanced.pipeline.max_streams "
              "(64)"),
])
def test_streams_that_do_not_pair_up_are_one_clear_line(tmp_path: Path, args: list[str],
                                                         message: str) -> None:
    args = [a.replace("{out}", str(tmp_path / "x.mp4")) for a in args]
    result = livecam("run", "--frames", "1", *args, *QUIET)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.mp4").exists()


class Gate(StageBase):
    """Holds the frame ``at`` until ``release`` is set (a stage that stalls)."""

    name = "gate"

    def __init__(self, at: int) -> None:
        self.at = at
        self.stalled = threading.Event()
        self.release = threading.Event()

    def process(self, packet: Packet) -> Packet:
        if packet.frame.index == self.at:
            self.stalled.set()
            self.release.wait(30)
        return packet


class Raiser(StageBase):
    name = "raiser"

    def process(self, packet: Packet) -> Packet:
        raise RuntimeError("boom")


class Marker(StageBase):
    name = "marker"

    def process(self, packet: Packet) -> Packet:
        return packet.with_fields(image_bgr=np.full_like(packet.image_bgr, 7))


def stream_app(config: Config, stages: list[Any], stream: int, width: int = 64) -> App:
    return App(config, source=SyntheticSource(width=width, height=48, fps=60.0),
               sink=NullSink(), stages=stages, state=RuntimeState(identities=NAMES),
               stream=stream, input_label=f"synthetic:{width}x48", output_label="null")


def wait_until(condition: Any, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_one_streams_stall_never_holds_another(fast_config: Config) -> None:
    gate = Gate(at=5)
    streams = StreamSet([stream_app(fast_config, [gate], 0),
                         stream_app(fast_config, [Marker()], 1)])
    streams.start()
    try:
        assert gate.stalled.wait(20)
        s0, s1 = (a.metrics.counter("sent") for a in streams.apps)
        # while stream 0's stage holds its frame, stream 1 keeps swapping and sending, and
        # stream 0's output keeps sending (repeats), neither waits for the other
        assert wait_until(lambda: streams.apps[1].metrics.counter("processed") >= 30 + 5)
        assert streams.apps[0].metrics.counter("processed") <= 5
        assert wait_until(lambda: streams.apps[0].metrics.counter("sent") > s0 + 5)
        assert streams.apps[1].metrics.counter("sent") > s1
        gate.release.set()
        assert wait_until(lambda: streams.apps[0].metrics.counter("processed") > 10)
    finally:
        gate.release.set()
        streams.stop()


class OpenRecorder(StageBase):
    """Records its stream's open and frames in ``events``; stream 1's open first waits (up to
    2 s) for stream 0's first frame, which can only come if stream 0 already runs."""

    name = "open-recorder"

    def __init__(self, stream: int, events: list[tuple[str, int]],
                 first_frame: threading.Event) -> None:
        self.stream, self.events, self.first_frame = stream, events, first_frame

    def open(self) -> None:
        if self.stream == 1:
            self.first_frame.wait(2.0)
        self.events.append(("open", self.stream))

    def process(self, packet: Packet) -> Packet:
        self.events.append(("frame", self.stream))
        self.first_frame.set()
        return packet


def test_every_stream_is_opened_before_any_runs(fast_config: Config) -> None:
    """Before: each stream started its threads before the next stream was opened, so on the
    H200 the 16th stream loaded its models and captured its GPU graphs while 15 streams ran
    and held the GIL (104 s to start 16 streams, 15 s for 8)."""
    events: list[tuple[str, int]] = []
    first_frame = threading.Event()
    streams = StreamSet([stream_app(fast_config, [OpenRecorder(k, events, first_frame)], k)
                         for k in range(2)])
    streams.start()
    try:
        assert wait_until(lambda: ("frame", 1) in events)
    finally:
        streams.stop()
    assert events.index(("open", 1)) < events.index(("frame", 0)), events[:4]


def test_each_stream_fails_on_its_own(fast_config: Config) -> None:
    seen: list[Packet] = []
    streams = StreamSet([stream_app(fast_config, [Raiser()], 0),
                         stream_app(fast_config, [Marker()], 1)])
    streams.apps[1]._on_sent = lambda p, _img: seen.append(p) if p is not None else None
    streams.start()
    try:
        assert wait_until(lambda: len(seen) >= 10 and streams.apps[0].metrics.counter(
            "stage_errors") >= 10)
    finally:
        streams.stop()
    assert streams.apps[1].metrics.counter("stage_errors") == 0
    assert all(int(p.image_bgr[0, 0, 0]) == 7 for p in seen)


def test_stop_ends_every_stream_within_a_second(fast_config: Config) -> None:
    streams = StreamSet([stream_app(fast_config, [Marker()], k) for k in range(6)])
    streams.start()
    assert wait_until(lambda: all(a.metrics.counter("sent") > 3 for a in streams.apps))
    t0 = time.perf_counter()
    streams.stop(timeout_s=0.9)
    assert time.perf_counter() - t0 < 2.0  # six streams stopped together, not one by one
    assert streams.done


def test_build_streams_wires_one_app_per_pair(tmp_path: Path) -> None:
    config = load_config(None, ["control.api=false", "control.hotkeys=false",
                                f"identity.library_dir={tmp_path / 'lib'}"])
    streams = build_streams(config, pairs=[("synthetic:64x48", "null"),
                                           ("synthetic:80x48", "null")])
    assert [a.stream for a in streams.apps] == [0, 1]
    assert [a.describe()["input"] for a in streams.apps] == ["synthetic:64x48",
                                                              "synthetic:80x48"]
    # separate runtime state and command queues, one fan-out for the keys
    assert streams.apps[0].commands is not streams.apps[1].commands
    assert streams.commands.queues == (streams.apps[0].commands, streams.apps[1].commands)


@pytest.mark.slow
def test_a_run_sets_the_switch_interval_and_puts_it_back() -> None:
    """``advanced.pipeline.gil_switch_interval_ms`` holds while a run is started (the stage sees it)
    and Python's own value is back after stop, also with two streams whose starts overlap."""
    seen: list[float] = []

    class Probe(StageBase):
        name = "probe"

        def process(self, packet: Packet) -> Packet:
            seen.append(sys.getswitchinterval())
            return packet

    before = sys.getswitchinterval()
    config = load_config(None, ["advanced.pipeline.status_interval_s=0",
                                "advanced.pipeline.gil_switch_interval_ms=0.5"])
    apps = [App(config, source=SyntheticSource(width=64, height=48, fps=60.0), sink=NullSink(),
                stages=[Probe()], max_frames=3) for _ in range(2)]
    StreamSet(apps).run()
    assert seen and all(abs(s - 0.0005) < 1e-9 for s in seen)
    assert sys.getswitchinterval() == before


def test_a_start_says_where_its_time_went(caplog: pytest.LogCaptureFixture) -> None:
    # a GPU start takes about a minute (networks compiled or found compiled, graphs captured):
    # the user's log, and the benchmark's JSON, say which part took it
    class SlowOpen(StageBase):
        name = "slow"

        def open(self) -> None:
            time.sleep(0.3)  # at least this long: a lower bound, not a race

    app = stream_app(load_config(None, ["advanced.pipeline.status_interval_s=0"]),
                     [Marker(), SlowOpen()], stream=0)
    t0 = time.perf_counter()
    app.open()
    wall_ms = (time.perf_counter() - t0) * 1e3
    laps = app.open_timings_ms
    assert set(laps) == {"open marker", "open slow", "source", "prepare", "sink"}
    assert laps["open slow"] >= 300.0 > laps["open marker"]
    assert sum(laps.values()) <= wall_ms
    with caplog.at_level("INFO", logger="livecam"):
        app.start()
    try:
        line = next(r.getMessage() for r in caplog.records if "running:" in r.getMessage())
        # the whole, then its longest parts, the slow stage's open first
        found = re.search(r"opened in (\d+\.\d) s \(open slow (\d+\.\d) s, \w+", line)
        assert found, line
        assert float(found[1]) >= float(found[2]) >= 0.3, line
    finally:
        app.stop()

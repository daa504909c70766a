"""The whole runtime, capture → pipeline → output, with real threads and real sinks.

The virtual camera is pyvirtualcam itself with a recording backend registered through
``pyvirtualcam.register_backend`` (CI machines cannot load v4l2loopback); fake sources stand in
for cameras that stall or block, which a CI machine does not have either.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest

from livecam.app import App, build_app
from livecam.capture.sources import SyntheticSource
from livecam.config import Config, load_config
from livecam.core.metrics import Metrics
from livecam.core.stage import StageBase
from livecam.core.types import ImageBGR, Packet, RuntimeState
from livecam.output.sinks import NullSink, VirtualCamSink
from livecam.pipeline.passthrough import PassThrough
from tests.helpers.virtualcam import register_recording_backend


def live_config(*overrides: str) -> Config:
    return load_config(None, ["advanced.pipeline.status_interval_s=0", *overrides])


class SentLog:
    """Collects (frame index or None for a repeat, send time) from the output thread."""

    def __init__(self) -> None:
        self.items: list[tuple[int | None, float]] = []
        self.lock = threading.Lock()

    def __call__(self, packet: Packet | None, image: ImageBGR) -> None:
        with self.lock:
            self.items.append((None if packet is None else packet.frame.index, time.perf_counter()))


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` until true, failing after a deadline generous enough for a loaded
    host: these tests assert order, content and counts; speed is for scripts/ benchmarks."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.01)


def test_virtualcam_path_frames_in_order_and_unchanged() -> None:
    recording = register_recording_backend("recording-order")
    cfg = live_config("advanced.output.backend=recording-order", "capture.fps=60")
    log = SentLog()
    app = App(cfg, source=SyntheticSource(width=160, height=120, fps=60.0),
              sink=VirtualCamSink(backend="recording-order"), stages=[PassThrough()],
              on_sent=log)
    app.start()
    try:
        wait_until(lambda: sum(i is not None for i, _ in list(log.items)) >= 30,
                   "30 new frames sent")
    finally:
        app.stop()
    assert (recording.width, recording.height) == (160, 120) and recording.closed
    items = list(log.items)
    assert len(recording.frames) >= len(items)  # every send reached the camera
    new = [i for i, _ in items if i is not None]
    assert new == sorted(new) and len(set(new)) == len(new)  # never reordered or duplicated
    # BGR frames reach the camera untouched; a repeat is the frame before it again (black
    # before the first frame)
    src = SyntheticSource(width=160, height=120, fps=60.0)
    src.open()
    pattern = [src.read() for _ in range(30)]
    previous = np.zeros((120, 160, 3), np.uint8)
    for k, (index, _) in enumerate(items):
        expected = previous if index is None else pattern[index % 30]
        assert np.array_equal(recording.frames[k], expected), (k, index)
        previous = expected


class WaitsForNewerFrames(StageBase):
    """A stage slower than the camera by construction, at any host speed: it holds each frame
    until the camera has captured three more, and notes which frames it got."""

    name = "waits"

    def __init__(self) -> None:
        self.metrics: Metrics | None = None
        self.indices: list[int] = []
        self.done = threading.Event()  # set by the test before it stops the app

    def process(self, packet: Packet) -> Packet:
        assert self.metrics is not None
        self.indices.append(packet.frame.index)
        deadline = time.monotonic() + 60
        while (self.metrics.counter("captured") < packet.frame.index + 4
               and not self.done.is_set()):
            assert time.monotonic() < deadline, "the camera stopped capturing"
            time.sleep(0.005)
        return packet


def test_a_slow_stage_gets_the_newest_frame_and_drops_are_counted() -> None:
    """Latency is bounded by construction: a stage slower than the camera gets the newest
    frame each time, the ones in between are dropped and counted, never queued. (How much
    latency that is in ms is scripts/bench_passthrough.py's figure, not a timed assert.)"""
    stage = WaitsForNewerFrames()
    app = App(live_config("capture.fps=30"), source=SyntheticSource(width=320, height=240,
                                                                     fps=30.0),
              sink=NullSink(), stages=[stage])
    stage.metrics = app.metrics
    app.start()
    try:
        wait_until(lambda: app.metrics.counter("processed") >= 10, "10 frames processed")
    finally:
        got = list(stage.indices)  # all taken while the stage still waited for newer ones
        stage.done.set()
        app.stop()
    # when a frame is done, frames +1..+3 have been captured and +2 is in the mailbox at
    # least: the next frame taken skips the older ones (a queue would give +1)
    assert all(b - a >= 2 for a, b in itertools.pairwise(got)), got
    c = app.metrics.counters()
    assert c["dropped_capture"] >= len(got) - 1
    # every frame captured was processed or counted as dropped, but those in flight at stop
    threads = app.config.pipeline.threads
    unaccounted = c["captured"] - c["processed"] - c["dropped_capture"] - c["dropped_pipeline"]
    assert 0 <= unaccounted <= 2 * threads, c


def repeats_at_end(items: list[tuple[int | None, float]]) -> int:
    """How many of the last sends were repeats (0 before the first new frame)."""
    k = len(items)
    while k > 0 and items[k - 1][0] is None:
        k -= 1
    return len(items) - k if k > 0 else 0


class StallingSource(SyntheticSource):
    """A synthetic camera that stops delivering after ``after`` frames until ``resume``."""

    live = True

    def __init__(self, after: int) -> None:
        super().__init__(width=64, height=48, fps=30.0)
        self.after, self.n = after, 0
        self.stalled, self.resume = threading.Event(), threading.Event()

    def read(self) -> ImageBGR | None:
        self.n += 1
        if self.n == self.after:
            self.stalled.set()
            self.resume.wait(120)
        else:
            time.sleep(1 / 30)
        return super().read()


def test_output_keeps_sending_at_most_its_fps_while_capture_stalls() -> None:
    cfg = live_config("output.fps=30")
    log = SentLog()
    source = StallingSource(after=10)
    app = App(cfg, source=source, sink=NullSink(), stages=[PassThrough()], on_sent=log)
    app.start()
    try:
        assert source.stalled.wait(60)

        # nothing new comes: the output repeats the last frame instead of freezing
        wait_until(lambda: repeats_at_end(list(log.items)) >= 60,
                   "60 repeats while the camera stalls")
        items = list(log.items)
        source.resume.set()
        n = len(items)
        wait_until(lambda: any(i is not None for i, _ in list(log.items)[n:]),
                   "new frames after the camera came back")
    finally:
        source.resume.set()
        app.stop()
    repeats = items[len(items) - repeats_at_end(items):]
    # and never faster than its fps (a token bucket of 1.5 frames): a bound a loaded host
    # cannot break, unlike a lower bound on the rate; the send times are taken after each
    # send, so half a second of slack for a thread preempted there (60 fps would still fail)
    span_s = repeats[-1][1] - repeats[0][1]
    assert len(repeats) - 1 <= 30 * (span_s + 0.5) + 1.5, (len(repeats), span_s)


class BlockedSource(SyntheticSource):
    live = True

    def __init__(self) -> None:
        super().__init__(width=64, height=48, fps=30.0)
        self.reading = threading.Event()
        self.release = threading.Event()

    def read(self) -> ImageBGR | None:
        self.reading.set()
        self.release.wait()
        return super().read()


def test_stop_returns_while_capture_is_blocked() -> None:
    """A read wedged in the driver must not keep stop from returning (within about its join
    timeout; how fast is scripts/bench_sigterm.py's figure: here it must return at all)."""
    source = BlockedSource()
    app = App(live_config(), source=source, sink=NullSink(), stages=[PassThrough()])
    app.start()
    try:
        assert source.reading.wait(60)
        stopper = threading.Thread(target=app.stop, daemon=True)
        t0 = time.perf_counter()
        stopper.start()
        stopper.join(60)
        assert not stopper.is_alive(), "stop waited for the blocked read"
        assert not source.release.is_set()  # it returned with the read still blocked
        print(f"stop returned in {time.perf_counter() - t0:.2f} s with the read blocked")
    finally:
        source.release.set()


class Exploding(StageBase):
    name = "exploding"

    def process(self, packet: Packet) -> Packet:
        raise RuntimeError("boom")


def test_failing_stage_sends_the_frame_unswapped() -> None:
    log = SentLog()
    app = App(live_config("advanced.pipeline.realtime=false"), source=SyntheticSource(
        width=64, height=48, fps=30.0), sink=NullSink(), stages=[Exploding()], max_frames=10,
        on_sent=log)
    app.start()
    assert app.wait(60)
    app.stop()
    assert [i for i, _ in log.items] == list(range(10))
    assert app.metrics.counter("stage_errors") >= 10


@pytest.mark.parametrize("realtime", ["true", "false"])
def test_file_output_decodes_to_the_right_frames(tmp_path: Path, realtime: str) -> None:
    out = tmp_path / "out.mp4"
    cfg = live_config(f"advanced.pipeline.realtime={realtime}", "capture.fps=60")
    app = build_app(cfg, input_spec="synthetic:320x240", output_spec=f"file:{out}",
                    max_frames=40)
    app.start()
    assert app.wait(60)
    app.stop()
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(frames) == 40
    assert frames[0].shape == (240, 320, 3)


def test_an_identity_command_is_logged_by_the_identity_it_chose(
        fast_config: Config, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 39 item 20: `next` was logged as `command StepIdentity(step=1)`; which face is
    on now is what the log reader wants."""
    import logging

    from livecam.core.commands import StepIdentity

    app = App(fast_config, source=SyntheticSource(width=64, height=48, fps=30.0),
              sink=NullSink(), stages=[PassThrough()],
              state=RuntimeState(active_identity="alice", identities=("alice", "bob")))
    with caplog.at_level(logging.INFO, logger="livecam.pipeline.scheduler"):
        app.start()
        try:
            ticket = app.commands.put(StepIdentity(+1))
            assert ticket.wait(60)
        finally:
            app.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "livecam.pipeline.scheduler"]
    assert "identity now 'bob' (StepIdentity)" in lines, lines


def test_build_app_hands_on_sent_each_image_the_output_sends() -> None:
    """``livecam demo`` goes through ``build_app`` and keeps a before/after pair through
    ``on_sent``: each sent frame reaches it, in order, with the image that was sent."""
    seen: list[tuple[int, tuple[int, ...]]] = []

    def on_sent(packet: Packet | None, image: ImageBGR) -> None:
        if packet is not None:
            seen.append((packet.frame.index, image.shape))

    cfg = live_config("advanced.pipeline.realtime=false")
    app = build_app(cfg, input_spec="synthetic:64x48", output_spec="null", max_frames=5,
                    on_sent=on_sent)
    app.run()
    assert seen == [(i, (48, 64, 3)) for i in range(5)]
    with pytest.raises(ValueError, match="without controls"):
        build_app(cfg, input_spec="synthetic:64x48", output_spec="null", controls=True,
                  on_sent=on_sent)

"""Frames in flight: an asynchronous last stage (the GPU pipeline's seam) under the scheduler.

The stage here is a small stand-in for the GPU stage with the same contract (submit from the
pipeline side, results collected in order on another thread, at most ``capacity`` in flight):
a worker thread finishes each packet after a delay. What is under test is the runtime's
handling (order, the bound on frames in flight, newest frame wins, errors, reload, stop),
which does not depend on what the work computes; the real GPU stage runs through the same
scheduler in tests/gpupipe.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np
import pytest

from livecam.core.stage import AsyncStage, StageBase
from livecam.core.types import Packet
from livecam.pipeline.chain import split_tail
from tests.pipeline.test_scheduler import Recorder, Rig, random_delay


class Lagging:
    """An async stage: ``submit`` queues the packet, a worker finishes it after
    ``delay_s()`` (adding 10 to the picture), ``collect`` returns the oldest finished one.
    ``fail_submit`` / ``fail_work`` name frame indices whose submit / work raises."""

    def __init__(self, name: str = "lagging", *, capacity: int = 3,
                 delay_s: Callable[[], float] = lambda: 0.002,
                 fail_submit: frozenset[int] = frozenset(),
                 fail_work: frozenset[int] = frozenset()) -> None:
        self.name = name
        self._capacity = capacity
        self._delay_s = delay_s
        self._fail_submit = fail_submit
        self._fail_work = fail_work
        self._cond = threading.Condition()
        self._todo: deque[Packet] = deque()
        self._done: deque[Packet | Exception] = deque()
        self._worker: threading.Thread | None = None
        self._closing = False
        self.in_flight = 0
        self.max_in_flight = 0
        self.submitted: list[int] = []
        self.closed = False
        self.used_after_close = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def open(self) -> None:
        self._worker = threading.Thread(target=self._work, daemon=True)
        self._worker.start()

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self.closed = True

    def submit(self, packet: Packet) -> None:
        if self.closed:
            self.used_after_close += 1
        if packet.frame.index in self._fail_submit:
            raise RuntimeError("submit failed")
        with self._cond:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            assert self.in_flight <= self._capacity, "submitted past capacity"
            self.submitted.append(packet.frame.index)
            self._todo.append(packet)
            self._cond.notify_all()

    def collect(self, timeout_s: float) -> Packet | None:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._done), timeout_s):
                return None
            item = self._done.popleft()
            self.in_flight -= 1
        if isinstance(item, Exception):
            raise item
        return item

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._todo) or self._closing)
                if self._closing:
                    return
                packet = self._todo[0]
            time.sleep(self._delay_s())
            result: Packet | Exception = (
                RuntimeError("work failed") if packet.frame.index in self._fail_work
                else packet.with_fields(image_bgr=packet.image_bgr + 10))
            with self._cond:
                self._todo.popleft()
                self._done.append(result)
                self._cond.notify_all()


def test_the_async_stage_is_recognised_and_only_allowed_last() -> None:
    tail, a = Lagging(), Recorder("a")
    assert isinstance(tail, AsyncStage) and not isinstance(a, AsyncStage)
    assert split_tail([a, tail]) == ((a,), tail)
    assert split_tail([a]) == ((a,), None)
    with pytest.raises(ValueError, match="only the last stage"):
        split_tail([tail, a])


@pytest.mark.parametrize("threads", [1, 2])
def test_offline_every_frame_in_order_with_several_in_flight(threads: int) -> None:
    tail = Lagging(capacity=3, delay_s=random_delay(8, 0.006))
    tail.open()
    analysis = Recorder("analysis", random_delay(9, 0.002))
    rig = Rig([analysis, tail], threads=threads, policy="block", n_frames=120)
    rig.run()
    tail.close()
    assert rig.indices == list(range(120))
    assert tail.submitted == list(range(120))
    # the ring was used: frames overlapped, never more than its capacity
    assert 2 <= tail.max_in_flight <= 3
    # both stages' work is in every packet (1 from the recorder, 10 from the async stage)
    assert all(int(p.image_bgr[0, 0, 0]) == 11 for p in rig.out)
    assert rig.metrics.counter("processed") == 120
    assert "lagging" in rig.metrics.stage_times_ms()


def test_live_newest_frame_wins_and_in_flight_stays_bounded() -> None:
    """The camera outruns the async stage: frames are dropped before it (the capture hop),
    never queued; what goes out is in order and at most ``capacity`` were ever in flight."""
    tail = Lagging(capacity=2, delay_s=lambda: 0.02)
    tail.open()
    rig = Rig([tail], threads=1, policy="latest", n_frames=150, fps=300.0)
    rig.run()
    tail.close()
    idx = rig.indices
    assert idx == sorted(idx) and len(set(idx)) == len(idx)
    assert idx[-1] == 149  # the newest frame gets through at the end
    assert tail.max_in_flight <= 2
    assert rig.frames.dropped > 0  # dropped at the capture hop, not queued in the stage
    assert len(idx) + rig.frames.dropped + rig.packets.dropped == 150


def test_failed_submit_and_failed_work_go_out_in_their_place() -> None:
    tail = Lagging(capacity=3, fail_submit=frozenset({3}), fail_work=frozenset({5, 6}))
    tail.open()
    rig = Rig([Recorder("a"), tail], threads=1, policy="block", n_frames=12)
    rig.run()
    tail.close()
    assert rig.indices == list(range(12))
    # the fallback, in its place: the captured frame, covered where faces were known (here
    # none: all of it), never the stage's work
    failed = {p.frame.index for p in rig.out if int(p.image_bgr[0, 0, 0]) != 11}
    assert failed == {3, 5, 6}
    assert rig.metrics.counter("stage_errors") == 3


def test_reload_between_sync_and_async_stages_never_uses_a_closed_stage() -> None:
    """A reload can turn the pass-through into the GPU stage and back (identities added or
    removed): frames in flight finish on the stages they started on."""
    generations: list[list[StageBase | Lagging]] = [[Recorder("sync0", lambda: 0.002)]]
    rig = Rig(list(generations[0]), threads=1, policy="latest", n_frames=400, fps=300.0)  # type: ignore[arg-type]
    rig.start()
    for k in range(1, 6):
        time.sleep(0.15)
        new: list[StageBase | Lagging]
        if k % 2:
            tail = Lagging(f"async{k}", capacity=3, delay_s=lambda: 0.004)
            tail.open()
            new = [Recorder(f"pre{k}"), tail]
        else:
            new = [Recorder(f"sync{k}", lambda: 0.002)]
        rig.scheduler.replace_stages(new)  # type: ignore[arg-type]
        generations.append(new)
    time.sleep(0.2)
    rig.join(20.0)
    rig.scheduler.close_stages()
    stages = [s for gen in generations for s in gen]
    assert sum(s.used_after_close for s in stages) == 0  # type: ignore[union-attr]
    assert all(s.closed for s in stages)  # type: ignore[union-attr]
    assert any(isinstance(s, Lagging) and s.submitted for s in stages)
    idx = rig.indices
    assert idx == sorted(idx) and len(set(idx)) == len(idx)


def test_stop_returns_within_a_second_with_frames_in_flight() -> None:
    tail = Lagging(capacity=3, delay_s=lambda: 0.5)  # slow work, several frames inside it
    tail.open()
    rig = Rig([tail], threads=1, policy="block", n_frames=50)
    rig.start()
    deadline = time.monotonic() + 10
    while tail.in_flight < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tail.in_flight == 3
    t0 = time.perf_counter()
    rig.scheduler.stop(join_timeout_s=0.9)
    assert time.perf_counter() - t0 < 1.0
    assert not rig.scheduler.alive
    assert rig.packets.closed
    tail.close()


def test_in_flight_is_reported() -> None:
    tail = Lagging(capacity=3, delay_s=lambda: 0.3)
    tail.open()
    rig = Rig([tail], threads=1, policy="block", n_frames=10)
    rig.start()
    deadline = time.monotonic() + 10
    while rig.scheduler.in_flight < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 2 <= rig.scheduler.in_flight <= 3
    rig.join(20.0)
    tail.close()
    assert rig.scheduler.in_flight == 0
    assert np.array_equal(rig.indices, np.arange(10))


def test_slow_set_up_runs_before_the_output_sends_anything(
        caplog: pytest.LogCaptureFixture) -> None:
    """A stage that captures CUDA graphs for the frame size (seconds) does it in start(),
    logged, before the output thread exists: no black frames go out meanwhile."""
    import logging

    from livecam.app import App
    from livecam.capture.sources import SyntheticSource
    from livecam.config import load_config
    from livecam.output.sinks import NullSink

    class Preparing(StageBase):
        name = "preparing"

        def __init__(self) -> None:
            self.prepared: list[tuple[int, int]] = []
            self.sent_then: list[int] = []
            self.app: App | None = None

        def prepare(self, width_px: int, height_px: int) -> None:
            assert self.app is not None
            self.prepared.append((width_px, height_px))
            self.sent_then.append(self.app.metrics.counter("sent"))

        def process(self, packet: Packet) -> Packet:
            return packet

    stage = Preparing()
    app = App(load_config(None, ["advanced.pipeline.status_interval_s=0"]),
              source=SyntheticSource(width=64, height=48, fps=60.0), sink=NullSink(),
              stages=[stage], max_frames=5)
    stage.app = app
    with caplog.at_level(logging.INFO, logger="livecam.pipeline.runtime"):
        app.run()
    assert stage.prepared == [(64, 48)] and stage.sent_then == [0]
    assert app.metrics.counter("sent") == 5
    assert any("preparing stage preparing for 64x48" in r.getMessage() for r in caplog.records)

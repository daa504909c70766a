"""The scheduler split over threads: order, bounded latency, commands, errors, reload, stop.

Stages here are small test stages that sleep or record what they saw: what is under test is the
threading (hops, ordering, state hand-off), which does not depend on what a stage computes. The
real analysis and swap stages run through the same scheduler in tests/test_app.py and in
scripts/bench_swap.py.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from livecam.core.commands import CommandQueue, SelectIdentity
from livecam.core.mailbox import Mailbox, MailboxClosed, Policy
from livecam.core.metrics import Metrics
from livecam.core.stage import StageBase
from livecam.core.types import Faces, Frame, Packet, RuntimeState
from livecam.pipeline.chain import split_stages
from livecam.pipeline.scheduler import Scheduler
from livecam.swap.cover import FaceCover


class Recorder(StageBase):
    """Sleeps ``delay_s()`` then records (frame index, active identity, thread name)."""

    def __init__(self, name: str, delay_s: Callable[[], float] = lambda: 0.0) -> None:
        self.name = name
        self.delay_s = delay_s
        self.seen: list[tuple[int, str | None, str]] = []
        self.closed = False
        self.used_after_close = 0

    def process(self, packet: Packet) -> Packet:
        if self.closed:
            self.used_after_close += 1
        time.sleep(self.delay_s())
        self.seen.append((packet.frame.index, packet.state.active_identity,
                          threading.current_thread().name))
        return packet.with_fields(image_bgr=packet.image_bgr + 1)

    def close(self) -> None:
        self.closed = True


class Raiser(StageBase):
    name = "raiser"

    def process(self, packet: Packet) -> Packet:
        raise RuntimeError("boom")


class Rig:
    """A scheduler between a producer of frames and a consumer of packets, both threads."""

    def __init__(self, stages: list[StageBase], *, threads: int, policy: Policy,
                 n_frames: int, fps: float | None = None,
                 image: np.ndarray | None = None, error_cover: FaceCover | None = None) -> None:
        self.frames: Mailbox[Frame] = Mailbox(policy=policy)
        self.packets: Mailbox[Packet] = Mailbox(policy=policy)
        self.commands = CommandQueue()
        self.metrics = Metrics()
        self.scheduler = Scheduler(stages=stages, inbox=self.frames, outbox=self.packets,
                                   commands=self.commands, metrics=self.metrics,
                                   state=RuntimeState(), threads=threads, hop_policy=policy,
                                   error_cover=error_cover)
        self.out: list[Packet] = []
        self.latency_ms: list[float] = []
        self._n_frames, self._fps = n_frames, fps
        self._image = np.zeros((4, 4, 3), np.uint8) if image is None else image
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._consumer = threading.Thread(target=self._consume, daemon=True)

    def _produce(self) -> None:
        image = self._image
        for i in range(self._n_frames):
            if self._fps is not None:
                time.sleep(1 / self._fps)
            if not self.frames.put(Frame(i, time.perf_counter_ns(), image)):
                return
        self.frames.close()

    def _consume(self) -> None:
        while True:
            try:
                packet = self.packets.get(timeout_s=0.1)
            except MailboxClosed:
                return
            if packet is not None:
                self.latency_ms.append((time.perf_counter_ns() - packet.frame.t_capture_ns) / 1e6)
                self.out.append(packet)

    def run(self, timeout_s: float = 20.0) -> None:
        self.start()
        self.join(timeout_s)

    def start(self) -> None:
        self._consumer.start()
        self.scheduler.start()
        self._producer.start()

    def join(self, timeout_s: float) -> None:
        self._consumer.join(timeout_s)
        assert not self._consumer.is_alive(), "the pipeline did not finish"
        self.scheduler.stop()

    @property
    def indices(self) -> list[int]:
        return [p.frame.index for p in self.out]


def random_delay(seed: int, max_s: float) -> Callable[[], float]:
    rng = random.Random(seed)
    return lambda: rng.uniform(0.0, max_s)


def test_split_puts_analysis_and_the_rest_apart() -> None:
    a, b, c = Recorder("a"), Recorder("b"), Recorder("c")
    assert split_stages([a, b, c], 1) == ((a, b, c),)
    assert split_stages([a, b, c], 2) == ((a,), (b, c))
    assert split_stages([a, b, c], 4) == ((a,), (b,), (c,), ())
    assert split_stages([a], 2) == ((a,), ())
    with pytest.raises(ValueError, match="at least 1"):
        split_stages([a], 0)


def test_offline_two_threads_every_frame_in_order_under_random_delays() -> None:
    first = Recorder("first", random_delay(1, 0.004))
    second = Recorder("second", random_delay(2, 0.004))
    rig = Rig([first, second], threads=2, policy="block", n_frames=150)
    rig.run()
    assert rig.indices == list(range(150))
    assert rig.scheduler.dropped == 0
    # both stages ran on every frame, each on its own thread, and the results compose
    assert {t for _, _, t in first.seen} == {"livecam-pipeline"}
    assert {t for _, _, t in second.seen} == {"livecam-pipeline-2"}
    assert all(int(p.image_bgr[0, 0, 0]) == 2 for p in rig.out)


@pytest.mark.parametrize("threads", [2, 3])
def test_live_frames_never_reordered_and_drops_counted(threads: int) -> None:
    stages = [Recorder("a", random_delay(3, 0.01)), Recorder("b", random_delay(4, 0.02)),
              Recorder("c", random_delay(5, 0.01))]
    rig = Rig(list(stages), threads=threads, policy="latest", n_frames=200, fps=200.0)
    rig.run()
    idx = rig.indices
    assert idx == sorted(idx) and len(set(idx)) == len(idx)
    assert idx[-1] == 199  # the newest frame always gets through at the end
    dropped = rig.scheduler.dropped + rig.frames.dropped + rig.packets.dropped
    assert rig.scheduler.dropped > 0  # a hop had to drop, it did not queue
    assert len(idx) + dropped == 200  # every frame is either sent or counted as dropped
    assert rig.metrics.counter("dropped_pipeline") == rig.scheduler.dropped


def test_slow_second_group_keeps_latency_bounded() -> None:
    slow_s, fps = 0.05, 100.0
    rig = Rig([Recorder("fast"), Recorder("slow", lambda: slow_s)], threads=2,
              policy="latest", n_frames=150, fps=fps)
    rig.run()
    lat = np.asarray(rig.latency_ms)
    # at most: waiting in the first mailbox and the hop while the slow stage finishes one
    # frame, then its own run: about 2-3 slow periods, never a backlog of 1.5 s of frames
    bound_ms = 3 * slow_s * 1e3 + 2 * 1e3 / fps + 30
    assert len(lat) >= 10
    assert lat.max() < bound_ms, f"latency {lat.max():.0f} ms > {bound_ms:.0f} ms"
    assert np.median(lat[-5:]) < np.median(lat[:5]) + 40  # no backlog building up
    assert rig.scheduler.dropped > 30  # the slow group dropped, counted at its hop
    assert rig.metrics.counter("processed") == len(rig.out)


def test_command_takes_effect_for_all_groups_from_the_same_frame() -> None:
    first = Recorder("first", random_delay(6, 0.003))
    second = Recorder("second", random_delay(7, 0.006))
    rig = Rig([first, second], threads=2, policy="latest", n_frames=240, fps=200.0)
    rig.start()
    names = ["a", "b", "c", "d"]
    tickets = []
    for name in names:
        time.sleep(0.2)
        tickets.append(rig.commands.put(SelectIdentity(name)))
    rig.join(20.0)
    assert all(t.wait(0) for t in tickets)
    by_index_first = {i: name for i, name, _ in first.seen}
    by_index_second = {i: name for i, name, _ in second.seen}
    both = sorted(set(by_index_first) & set(by_index_second))
    assert len(both) > 50
    # each frame was swapped under one state by both groups, even though the second group ran
    # it on another thread after the first group had already moved on to newer commands
    assert all(by_index_first[i] == by_index_second[i] for i in both)
    order = [None, *names]
    ranks = [order.index(by_index_second[i]) for i in both]
    assert ranks == sorted(ranks)  # one switch point per command, never back and forth
    assert set(ranks) == set(range(len(order)))
    sent = [p.state.active_identity for p in rig.out]
    assert [order.index(s) for s in sent] == sorted(order.index(s) for s in sent)


class FaceFinder(StageBase):
    """Stands in for analysis: says a face is at ``FACE_BOX`` (what the swap would get)."""

    name = "finder"

    def process(self, packet: Packet) -> Packet:
        return packet.with_fields(faces=Faces(boxes_xyxy=np.array([FACE_BOX], np.float32),
                                              scores=np.ones(1, np.float32),
                                              track_ids=np.ones(1, np.int64)))


FACE_BOX = (40.0, 40.0, 100.0, 110.0)


def _textured(seed: int = 0) -> np.ndarray:
    """A 160x160 picture with detail everywhere (a cover visibly removes it)."""
    image = np.random.default_rng(seed).integers(0, 256, (160, 160, 3), dtype=np.uint8)
    image.flags.writeable = False
    return image


@pytest.mark.parametrize("failing_group", [0, 1])
def test_a_raising_stage_never_sends_a_known_face_as_it_is(failing_group: int) -> None:
    """Fail closed: before fail-closed the frame went out unswapped (the real face). Now the
    faces known when the stage failed are covered; with none known (analysis itself failed)
    the whole frame is."""
    after = Recorder("after")
    stages: list[StageBase] = ([Raiser(), FaceFinder(), after] if failing_group == 0
                               else [FaceFinder(), Raiser(), after])
    image = _textured()
    rig = Rig(stages, threads=2, policy="block", n_frames=20, image=image)
    rig.run()
    assert rig.indices == list(range(20))
    assert after.seen == []  # stages after the failing one were skipped
    assert rig.metrics.counter("stage_errors") == 20
    x1, y1, x2, y2 = (int(v) for v in FACE_BOX)
    for p in rig.out:
        out = p.image_bgr.astype(np.int16)
        face_change = np.abs(out[y1:y2, x1:x2] - image[y1:y2, x1:x2]).mean()
        assert face_change > 40  # the face is covered (random detail averaged away)
        corner_change = np.abs(out[:20, -20:] - image[:20, -20:]).mean()
        if failing_group == 0:
            assert corner_change > 40  # no face known: everything covered
        else:
            assert corner_change == 0  # away from the known face nothing changed


def test_a_raising_stage_sends_the_frame_unswapped_when_real_is_asked_for() -> None:
    """``swap.unswappable: real`` is the explicit choice of the old behaviour."""
    rig = Rig([FaceFinder(), Raiser()], threads=2, policy="block", n_frames=5,
              image=_textured(), error_cover=FaceCover(mode="real"))
    rig.run()
    assert all(p.image_bgr is p.frame.image_bgr for p in rig.out)


def test_replace_stages_while_running_never_uses_a_closed_stage() -> None:
    current = [Recorder("a0", lambda: 0.002), Recorder("b0", lambda: 0.004)]
    rig = Rig(list(current), threads=2, policy="latest", n_frames=400, fps=300.0)
    rig.start()
    generations = [current]
    for k in range(1, 6):
        time.sleep(0.15)
        new = [Recorder(f"a{k}", lambda: 0.002), Recorder(f"b{k}", lambda: 0.004)]
        rig.scheduler.replace_stages(new)
        generations.append(new)
    time.sleep(0.2)
    rig.join(20.0)
    rig.scheduler.close_stages()
    stages = [s for gen in generations for s in gen]
    assert sum(s.used_after_close for s in stages) == 0
    assert all(s.closed for s in stages)
    # the newest stages ran, and the second group of each generation on the worker thread
    assert generations[-1][1].seen and {t for _, _, t in generations[-1][1].seen} == {
        "livecam-pipeline-2"}
    # no frame mixes generations: each frame seen by b_k was seen by a_k
    for a, b in generations:
        assert {i for i, _, _ in b.seen} <= {i for i, _, _ in a.seen}
    idx = rig.indices
    assert idx == sorted(idx)


def test_stop_returns_within_a_second_with_a_busy_worker_and_a_full_outbox() -> None:
    # nothing consumes the outbox (a stuck sink) and the second group is mid-sleep
    frames: Mailbox[Frame] = Mailbox(policy="block")
    packets: Mailbox[Packet] = Mailbox(policy="block")
    scheduler = Scheduler(stages=[Recorder("a"), Recorder("b", lambda: 0.3)], inbox=frames,
                          outbox=packets, commands=CommandQueue(), metrics=Metrics(),
                          state=RuntimeState(), threads=2, hop_policy="block")
    scheduler.start()
    image = np.zeros((4, 4, 3), np.uint8)
    for i in range(3):
        frames.put(Frame(i, time.perf_counter_ns(), image), timeout_s=1.0)
    time.sleep(0.4)
    t0 = time.perf_counter()
    scheduler.stop(join_timeout_s=0.9)
    assert time.perf_counter() - t0 < 1.0
    assert not scheduler.alive
    assert packets.closed  # the consumer is told the pipeline ended

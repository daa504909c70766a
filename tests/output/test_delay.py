"""The A/V delay (issue 13 item 6): every frame leaves the output ``delay_ms`` after capture,
never early, in order, none lost uncounted; it can be changed while running.

A producer thread stands in for the pipeline (frames captured at 30 fps, as a camera gives
them); the output thread and its metrics are the real ones. How close to ``delay_ms`` frames
leave (one frame on an idle machine) is scripts/measure_av_delay.py's figure: on a loaded host
threads wake late, so it is not asserted here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from livecam.core.mailbox import Mailbox
from livecam.core.metrics import Metrics
from livecam.core.types import Frame, ImageBGR, Packet
from livecam.output.sinks import NullSink
from livecam.output.thread import OutputThread

FPS = 30.0


class Sent:
    """(send time ns, capture time ns, frame index) of each new frame, with a wait."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, int]] = []
        self._cond = threading.Condition()

    def __call__(self, packet: Packet | None, image: ImageBGR) -> None:
        now = time.perf_counter_ns()
        if packet is not None:
            with self._cond:
                self.items.append((now, packet.frame.t_capture_ns, packet.frame.index))
                self._cond.notify_all()

    def wait_count(self, n: int, timeout_s: float = 30.0) -> list[tuple[int, int, int]]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.items) >= n, timeout_s), len(self.items)
            return list(self.items)


class Camera:
    """Puts a packet into ``box`` every 1/30 s, stamped with its capture time; ``put`` counts
    them."""

    def __init__(self, box: Mailbox[Packet]) -> None:
        self._box = box
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._image = np.zeros((48, 64, 3), np.uint8)
        self.put = 0

    def _run(self) -> None:
        index = 0
        t_next = time.perf_counter()
        while not self._stop.is_set():
            frame = Frame(index=index, t_capture_ns=time.perf_counter_ns(),
                          image_bgr=self._image)
            if not self._box.put(Packet.from_frame(frame)):
                return  # closed
            index += 1
            self.put = index
            t_next += 1 / FPS
            self._stop.wait(max(0.0, t_next - time.perf_counter()))

    def __enter__(self) -> Camera:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        self._box.close()


@pytest.fixture
def rig() -> Iterator[tuple[OutputThread, Mailbox[Packet], Sent, Metrics]]:
    box: Mailbox[Packet] = Mailbox(policy="latest")
    sent, metrics = Sent(), Metrics()
    out = OutputThread(sink=NullSink(), inbox=box, metrics=metrics, width=64, height=48,
                       fps=FPS, realtime=True, on_sent=sent, delay_ms=150.0)
    out.start()
    try:
        yield out, box, sent, metrics
    finally:
        out.stop(1.0)


def delays_ms(items: list[tuple[int, int, int]]) -> np.ndarray:
    return np.array([(t_send - t_cap) / 1e6 for t_send, t_cap, _ in items])


def test_frames_leave_delay_ms_after_capture(rig: tuple[OutputThread, Mailbox[Packet], Sent,
                                                       Metrics]) -> None:
    _, box, sent, metrics = rig
    with Camera(box):
        items = sent.wait_count(45)
    delays = delays_ms(items)
    assert delays.min() >= 150.0  # never early
    assert [i for _, _, i in items] == sorted(i for _, _, i in items)  # in order
    assert metrics.latencies_ms()[0] >= 150.0  # the latency metric is what the viewer gets


def test_delay_changes_live(rig: tuple[OutputThread, Mailbox[Packet], Sent, Metrics]) -> None:
    out, box, sent, _ = rig
    with Camera(box) as camera:
        sent.wait_count(20)
        out.set_delay_ms(40.0)
        n_change = len(sent.wait_count(21))
        after = sent.wait_count(n_change + 40)[n_change + 5:]
        shorter = delays_ms(after)
        # never early; and shorter than before for one frame at least (35 frames each
        # sent over 110 ms late would take a host stalled far beyond "loaded")
        assert shorter.min() >= 40.0 and shorter.min() < 150.0
        out.set_delay_ms(300.0)
        n_change = len(sent.items)
        after = sent.wait_count(n_change + 30)[n_change + 2:]
    longer = delays_ms(after)
    assert longer.min() >= 300.0
    assert out.delay_ms == 300.0
    # frames held when the delay shrank were due at once: the newest went, the others were
    # counted; none is lost uncounted (the last held ones leave once due)
    deadline = time.monotonic() + 60
    while len(sent.items) + out.dropped + box.dropped < camera.put:
        assert time.monotonic() < deadline, (len(sent.items), out.dropped, box.dropped,
                                             camera.put)
        time.sleep(0.05)
    assert len(sent.items) + out.dropped + box.dropped == camera.put
    indices = [i for _, _, i in sent.items]
    assert indices == sorted(indices) and len(set(indices)) == len(indices)

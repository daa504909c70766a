"""Which waiting requests a GPU swap tick takes (:meth:`GpuSwapHub._launch`): the oldest of
each stream, of the oldest request's frame size, up to the tick's frames and faces; the others
wait on in their order. The scheduler is a stand-in recording each tick's requests (through
the hub's ring of a frame size): what is tested is the hub's choice, not the GPU work."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from livecam.gpupipe.hub import GpuSwapHub
from livecam.gpupipe.request import SwapRequest
from livecam.gpupipe.slots import FrameBuffers, SlotShape


class _Ring:
    """A scheduler of ``slots`` ticks in flight that records each tick's face rows."""

    def __init__(self, shape: SlotShape, slots: int) -> None:
        self.shape, self.slots = shape, slots
        self.ticks: list[list[int]] = []  # each tick's rows' frame indices
        self.in_flight: list[int] = []

    @property
    def ring_full(self) -> bool:
        return len(self.in_flight) >= self.slots

    def submit(self, frames_in: list[Any], frames_out: list[Any], rows: Any,
               ready: list[Any], hands: list[Any]) -> None:
        assert len(frames_in) == len(frames_out) == len(ready) == len(hands)
        self.ticks.append(rows.frame_index.tolist())
        self.in_flight.append(len(rows))

    def oldest_slot(self) -> Any:
        return SimpleNamespace(wait=lambda: None)

    def collect(self) -> Any:
        n = self.in_flight.pop(0)
        return SimpleNamespace(fits=np.ones(n, bool), gpu_latency_ms=0.0, window_px=64)

    def close(self) -> None:
        pass


def _hub(frames: int, faces: int, sizes: list[tuple[int, int]]) -> tuple[GpuSwapHub, dict]:
    hub = GpuSwapHub(None, emap=lambda: np.eye(4, dtype=np.float32),
                     source_embedding=lambda name: None, n_streams=4, max_faces=2,
                     collector_thread=False, frames_per_call=frames, faces_per_call=faces)
    hub._program = object()  # opened (the stand-in rings need no program)
    rings = {}
    for h, w in sizes:
        rings[(h, w)] = hub._rings[(h, w)] = _Ring(SlotShape(frames, h, w, faces, 4), 1)
    return hub, rings


def _request(stream: int, faces: int, buffers: FrameBuffers) -> SwapRequest:
    return SwapRequest(stream, buffers, buffers.take(),
                       np.full((faces, 5, 2), stream, np.float32),
                       np.zeros((faces, 4), np.float32))


def test_a_tick_takes_the_oldest_of_each_stream_and_the_rest_waits_in_order() -> None:
    hub, rings = _hub(frames=3, faces=4, sizes=[(8, 8), (6, 6)])
    big, small = ({s: FrameBuffers(h, h, 3, pinned=False) for s in range(4)} for h in (8, 6))
    first = _request(0, 1, big[0])
    hub.submit(first)  # a slot is free: a tick of its own
    assert [len(t) for t in rings[(8, 8)].ticks] == [1]
    # the ring is full now: these wait
    waiting = [_request(1, 1, big[1]), _request(1, 2, big[1]), _request(2, 1, small[2]),
               _request(3, 2, big[3]), _request(0, 1, big[0]), _request(2, 1, big[2])]
    for request in waiting:
        hub.submit(request)
    assert list(hub._pending) == waiting
    # the second tick: the 8x8 requests of streams 1 and 3 (3 faces), then stream 0's (1
    # more: 4 faces); stream 1's second waits behind its first, the 6x6 one for its size
    assert hub.collect_next(0.0)
    assert first.done.is_set()
    assert list(hub._pending) == [waiting[1], waiting[2], waiting[5]]
    assert rings[(8, 8)].ticks[1] == [0, 1, 1, 2]
    # the third: stream 1's second request, then stream 2's 8x8 one (stream 2's 6x6 one is
    # older but of the other size: it waits, first in line, and then goes out on its own
    # size's ring, free)
    assert hub.collect_next(0.0)
    assert rings[(8, 8)].ticks[2] == [0, 0, 1]
    assert rings[(6, 6)].ticks == [[0]] and not hub._pending
    while hub.collect_next(0.0):
        pass
    assert all(r.done.is_set() and r.error is None for r in waiting)


def test_a_request_past_the_faces_a_tick_holds_waits_for_the_next() -> None:
    hub, rings = _hub(frames=4, faces=3, sizes=[(8, 8)])
    buffers = {s: FrameBuffers(8, 8, 3, pinned=False) for s in range(4)}
    hub.submit(_request(0, 1, buffers[0]))
    waiting = [_request(1, 2, buffers[1]), _request(2, 2, buffers[2]),
               _request(3, 1, buffers[3])]
    for request in waiting:
        hub.submit(request)
    assert hub.collect_next(0.0)
    # stream 2's 2 faces would make 4: the tick stops there (stream 3's is not taken past it)
    assert rings[(8, 8)].ticks[1] == [0, 0]
    assert list(hub._pending) == waiting[1:]
    assert hub.collect_next(0.0)
    assert rings[(8, 8)].ticks[2] == [0, 0, 1]

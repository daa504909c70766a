"""A tick's face rows from several streams' requests: each request's rows in order, as one
concatenation of them would give, bit for bit (the rows are joined without numpy's
concatenate, which lets go of the GIL on the hub's launching thread); which waiting requests
a tick takes (one frame per stream, in order, one frame size, up to its frames and faces)."""

from __future__ import annotations

import collections

import numpy as np

from livecam.gpupipe.request import SwapRequest, take_tick, tick_rows
from livecam.gpupipe.slots import FrameBuffers
from livecam.swap.gpu.keep import LOOPS, POINTS


def _request(stream: int, faces: int, rng: np.random.Generator, *, keep: bool = False,
             size_px: int = 8) -> SwapRequest:
    buffers = FrameBuffers(size_px, size_px, 1, pinned=False)
    request = SwapRequest(stream, buffers, 0,
                          rng.normal(0, 500, (faces, 5, 2)).astype(np.float32),
                          rng.normal(0, 1, (faces, 512)).astype(np.float32))
    if keep:
        request.keep_xy = rng.normal(0, 500, (faces, LOOPS, POINTS, 2)).astype(np.float32)
        request.keep_soft = rng.random(faces).astype(np.float32)
    return request


def test_rows_of_several_requests_are_their_concatenation() -> None:
    rng = np.random.default_rng(5)
    requests = [_request(0, 2, rng, keep=True), _request(1, 1, rng, keep=False),
                _request(2, 3, rng, keep=True)]
    rows = tick_rows(requests)
    assert rows.frame_index.tolist() == [0, 0, 1, 2, 2, 2]
    assert rows.kps.tobytes() == np.concatenate([r.kps for r in requests]).tobytes()
    assert rows.latents.tobytes() == np.concatenate([r.latents for r in requests]).tobytes()
    assert rows.valid.all() and len(rows.valid) == 6
    assert rows.keep_xy is not None and rows.keep_soft is not None
    want_xy = np.concatenate([requests[0].keep_xy, np.zeros((1, LOOPS, POINTS, 2), np.float32),
                              requests[2].keep_xy])
    assert rows.keep_xy.tobytes() == want_xy.tobytes()
    assert rows.keep_soft.tolist() == [*requests[0].keep_soft.tolist(), 0.0,
                                       *requests[2].keep_soft.tolist()]


def test_one_request_without_kept_loops_has_none() -> None:
    rows = tick_rows([_request(0, 2, np.random.default_rng(6), keep=False)])
    assert rows.keep_xy is None and rows.keep_soft is None
    assert rows.frame_index.tolist() == [0, 0] and rows.kps.dtype == np.float32


def test_a_tick_takes_each_streams_oldest_frame_of_the_first_size() -> None:
    rng = np.random.default_rng(6)
    a0, a1, b0, big, c0, d0 = (_request(0, 1, rng), _request(0, 1, rng), _request(1, 2, rng),
                               _request(2, 1, rng, size_px=16), _request(3, 1, rng),
                               _request(4, 1, rng))
    pending = collections.deque([a0, a1, b0, big, c0, d0])
    taken, left = take_tick(pending, max_frames=8, max_faces=16)
    assert taken == [a0, b0, c0, d0]  # a1 waits for a0's tick; big is another size
    assert list(left) == [a1, big]
    assert list(pending) == [a0, a1, b0, big, c0, d0]  # the caller's queue is not changed


def test_a_tick_stops_at_its_frames_and_faces_and_keeps_the_order() -> None:
    rng = np.random.default_rng(7)
    r = [_request(k, faces, rng) for k, faces in enumerate((2, 2, 3, 1))]
    taken, left = take_tick(collections.deque(r), max_frames=8, max_faces=5)
    assert taken == r[:2] and list(left) == r[2:]  # r[3] would fit but stays behind r[2]
    taken, left = take_tick(collections.deque(r), max_frames=1, max_faces=16)
    assert taken == r[:1] and list(left) == r[1:]
    assert take_tick(collections.deque(), 8, 16) == ([], collections.deque())

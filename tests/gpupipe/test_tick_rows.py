"""A tick's face rows from several streams' requests: each request's rows in order, as one
concatenation of them would give, bit for bit (the rows are joined without numpy's
concatenate, which lets go of the GIL on the hub's launching thread)."""

from __future__ import annotations

import numpy as np

from livecam.gpupipe.request import SwapRequest, tick_rows
from livecam.gpupipe.slots import FrameBuffers
from livecam.gpupipe.swap.keep import LOOPS, POINTS


def _request(stream: int, faces: int, rng: np.random.Generator, *, keep: bool) -> SwapRequest:
    buffers = FrameBuffers(8, 8, 1, pinned=False)
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

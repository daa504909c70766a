"""Streams of livecam's own (livecam.engines.cuda_streams): never shared, so a graph captured on
one is not invalidated by another thread's work. CUDA only (the device machine runs these)."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]


def test_more_streams_than_torchs_pool_are_all_distinct() -> None:
    from livecam.engines.cuda_streams import new_stream, release_stream

    device = torch.device("cuda")
    pool = [torch.cuda.Stream(device) for _ in range(40)]
    assert len({s.cuda_stream for s in pool}) < 40  # why livecam does not use the pool
    own = [new_stream(device) for _ in range(40)]
    assert len({s.cuda_stream for s in own}) == 40
    kept = torch.ones(1024, device=device)
    with torch.cuda.stream(own[0]):
        used = kept * 2  # allocated on own[0]: freed after the stream is handed back
    for s in own:
        release_stream(s)
    del used  # the allocator records on own[0] (destroying it aborted the process)
    again = [new_stream(device) for _ in range(40)]
    assert {s.cuda_stream for s in again} == {s.cuda_stream for s in own}  # reused
    torch.cuda.synchronize(device)


def test_a_capture_survives_other_threads_working_on_their_own_streams() -> None:
    from livecam.engines.cuda_streams import new_stream

    device = torch.device("cuda")
    stop = threading.Event()
    errors: list[BaseException] = []

    def busy() -> None:
        stream = new_stream(device)
        x = torch.ones(256, 256, device=device)
        try:
            while not stop.is_set():
                with torch.cuda.stream(stream):
                    x = (x @ x).clamp(max=1.0)
                stream.synchronize()
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=busy) for _ in range(8)]
    for w in workers:
        w.start()
    try:
        side = new_stream(device)
        a = torch.ones(64, device=device)
        with torch.cuda.stream(side):
            b = a * 2  # warm-up on the capture stream
        side.synchronize()
        for _ in range(20):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
                b = a * 2
            graph.replay()
            torch.cuda.synchronize(device)
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert not errors
    assert float(b.sum()) == 128.0


def test_urgent_streams_run_at_the_highest_priority_and_are_reused_as_such() -> None:
    from livecam.engines.cuda_streams import new_stream, release_stream

    device = torch.device("cuda")
    greatest = torch.cuda.Stream.priority_range()[1]
    assert greatest < 0  # the device has priorities to give (every CUDA GPU since Kepler)
    urgent = [new_stream(device, urgent=True) for _ in range(3)]
    plain = [new_stream(device) for _ in range(3)]
    assert {s.priority for s in urgent} == {greatest}
    assert {s.priority for s in plain} == {0}
    for s in urgent + plain:
        release_stream(s)
    again = new_stream(device, urgent=True)  # an urgent one back, not a plain one
    assert again.priority == greatest
    assert again.cuda_stream in {s.cuda_stream for s in urgent}
    release_stream(again)


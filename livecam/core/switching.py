"""The interpreter's thread switch interval while pipelines run.

A pipeline runs several threads per stream (capture, stages, collectors, output), and many of
its calls let go of the GIL for a moment: a numpy reduction over a face's 468 landmarks, an
OpenCV call, a wait for the GPU. Each such thread must then take the GIL back from whichever
thread runs Python meanwhile, and CPython makes that thread give it up only after the switch
interval, 5 ms by default. Measured here (``scripts/bench_switching.py``): with three other
threads busy, ``landmarks.min(axis=0)`` took 6.0 ms on average (p99 59 ms) at 5 ms and 0.67 ms
(p99 6 ms) at 0.2 ms; on the H200, with 16 streams in one process, a quarter of the pipeline
threads' samples sat in such reductions.

:func:`switch_interval` sets ``advanced.pipeline.gil_switch_interval_ms`` while a run is started and
puts the interpreter's own value back when the last run using it stops.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_users = 0
_saved = 0.0


@contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """``sys.setswitchinterval(seconds)`` while inside (``seconds`` <= 0: leave it as it is);
    nested and concurrent users share it, and the value from before the first is restored
    when the last leaves."""
    global _users, _saved
    if seconds <= 0:
        yield
        return
    with _lock:
        if _users == 0:
            _saved = sys.getswitchinterval()
        _users += 1
        sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                sys.setswitchinterval(_saved)

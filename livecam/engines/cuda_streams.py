"""CUDA streams of livecam's own, instead of torch's pooled ones.

``torch.cuda.Stream()`` hands out one of 32 pooled CUDA streams per priority, round-robin, and
``torch.cuda.graph`` captures on one stream per process unless told otherwise. With several
pipeline streams in one process (each has its face networks, tile search, swap slots and capture
side streams) two threads end up on one CUDA stream: a CUDA graph that one thread captures on
it is invalidated by the other thread's work (8 streams starting together fail with
``cudaErrorStreamCaptureInvalidated``), and a ``synchronize`` waits for the other's work too.

:func:`new_stream` makes a stream nobody else holds: ``cuStreamCreate`` (non-blocking) from the
CUDA driver, which every CUDA machine has (``libcuda.so.1`` on Linux, ``nvcuda.dll`` on Windows;
macOS has no CUDA), in the primary context torch uses, wrapped as ``torch.cuda.ExternalStream``.
Streams are never destroyed: the caching allocator keeps each block's stream and records
events on it when the tensor is freed, maybe after its owner closed (destroying a closed
pipeline's streams aborts the process with "invalid device context"). A closed owner
hands its streams back (:func:`release_stream`) and the next :func:`new_stream` reuses them, so
opening and closing pipelines does not grow their number. Where the driver cannot be reached
that way, torch's pool serves, with a warning.

``urgent`` streams get the device's highest priority: the GPU's block scheduler starts their
kernels ahead of those queued on ordinary streams (nothing running is preempted), and a CUDA
graph replays at the priority of the stream it is launched into. The face follower's networks
use them: their thread waits for each result before the next frame's work, while the swap's
ticks are in flight and wait for nobody. With the GPU 80-90 % busy on one stream offline,
the follower's small kernels otherwise queue behind the generator's.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

_CU_STREAM_NON_BLOCKING = 1
_lock = threading.Lock()
_driver: Any = None
_driver_tried = False
#: (device index, priority) -> streams handed back, reused first
_free: dict[tuple[int, int], list[Any]] = {}


def _load_driver() -> Any:
    """The CUDA driver library, or None (explicit per platform)."""
    global _driver, _driver_tried
    with _lock:
        if _driver_tried:
            return _driver
        _driver_tried = True
        names: list[str]
        if sys.platform == "win32":
            names = ["nvcuda.dll"]
        elif sys.platform == "darwin":
            names = []  # no CUDA on macOS
        else:
            names = ["libcuda.so.1", "libcuda.so"]
        for name in names:
            try:
                _driver = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if _driver is None:
            log.warning("the CUDA driver library could not be loaded: CUDA streams come from "
                        "torch's pool of 32 (many streams in one process may share one)")
        return _driver


def new_stream(device: Any, *, urgent: bool = False) -> Any:
    """A non-blocking CUDA stream on ``device`` (a ``torch.device``) that no other caller holds,
    at the device's highest priority when ``urgent`` (else the default one); torch's pooled
    stream where the driver is not reachable."""
    import torch

    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    # (least, greatest): 0 and a negative number on CUDA devices; lower runs first. A static
    # method at run time; torch's stubs declare it on instances
    priority = torch.cuda.Stream.priority_range()[1] if urgent else 0  # type: ignore[call-arg]
    with _lock:
        if _free.get((index, priority)):
            return _free[(index, priority)].pop()
    driver = _load_driver()
    if driver is not None:
        with torch.cuda.device(index):
            torch.cuda.current_stream(index).synchronize()  # the primary context is current
            handle = ctypes.c_void_p()
            err = driver.cuStreamCreateWithPriority(ctypes.byref(handle),
                                                    _CU_STREAM_NON_BLOCKING, priority)
        if err == 0 and handle.value:
            return torch.cuda.ExternalStream(handle.value, device=torch.device("cuda", index))
        log.warning("cuStreamCreateWithPriority failed (CUresult %d): using torch's pooled "
                    "streams", err)
    return torch.cuda.Stream(device, priority=priority)


def release_stream(stream: Any) -> None:
    """Hand back a stream from :func:`new_stream` once its owner is done with it (it is reused,
    never destroyed; torch's pooled streams are left to torch)."""
    import torch

    if stream is None or not isinstance(stream, torch.cuda.ExternalStream):
        return
    stream.synchronize()
    with _lock:
        _free.setdefault((stream.device.index, stream.priority), []).append(stream)

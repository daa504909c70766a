"""A recording pyvirtualcam backend, for tests on machines without a virtual camera device.

Registered through pyvirtualcam's public ``register_backend`` seam, it makes the production
``VirtualCamSink`` → ``pyvirtualcam.Camera`` path run unchanged; only the device at the end is
replaced by a list in memory. (CI machines cannot load the v4l2loopback kernel module.)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Recording:
    """What a recording backend received: frames as (H, W, 3) uint8 in the camera's format,
    or (H * 3 / 2, W) planes for an I420 camera."""

    width: int = 0
    height: int = 0
    fps: float = 0.0
    fourcc: int = 0
    device: str = ""
    frames: list[np.ndarray] = field(default_factory=list)
    t_sent_ns: list[int] = field(default_factory=list)
    closed: bool = False
    keep_frames: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.t_sent_ns)


def register_recording_backend(name: str = "recording", *, keep_frames: bool = True) -> Recording:
    """Register a backend called ``name`` with pyvirtualcam and return what it will record.

    Use ``--set advanced.output.backend=<name>`` (or ``OutputConfig(backend=name)``) to select it.
    ``keep_frames=False`` records only send times (long runs).
    """
    import time

    import pyvirtualcam

    recording = Recording(keep_frames=keep_frames)
    i420 = pyvirtualcam.camera.encode_fourcc(pyvirtualcam.PixelFormat.I420.value)

    class RecordingBackend:
        def __init__(self, *, width: int, height: int, fps: float, fourcc: int,
                     device: str | None, **kw: Any) -> None:
            recording.width, recording.height, recording.fps = width, height, fps
            recording.fourcc, recording.device = fourcc, device or "recording0"

        def send(self, frame: np.ndarray) -> None:
            now = time.perf_counter_ns()
            with recording.lock:
                recording.t_sent_ns.append(now)
                if recording.keep_frames and recording.fourcc == i420:
                    recording.frames.append(frame.reshape(-1, recording.width).copy())
                elif recording.keep_frames:
                    recording.frames.append(
                        frame.reshape(recording.height, recording.width, -1).copy()
                    )

        def close(self) -> None:
            recording.closed = True

        def device(self) -> str:
            return recording.device

        def native_fourcc(self) -> int | None:
            return recording.fourcc

    pyvirtualcam.register_backend(name, RecordingBackend)
    return recording

"""Frames copied into page-locked host memory on the capture thread.

On the H200 one stream offline is bound by the pipeline thread (the face follower): each frame
it copied the captured image into the networks' pinned staging buffer (a 1080p frame is 6 MB)
before the upload could start. :class:`PinnedFrames` moves that copy to the capture thread,
which waits for the source most of the time: the capture thread hands on a read-only view of a
pinned frame (:meth:`PinnedFrames.stage`), and the networks upload straight from it
(:meth:`PinnedFrames.find`), with no host copy on the follower's thread.

A pinned frame is reused only once nothing refers to it any more (its array's reference count
is back to the pool's own; every numpy view and torch tensor made from it holds a reference)
and its last upload has completed (the CUDA event given to :meth:`PinnedFrames.uploaded`). When
none is free and the pool is at its size, or the pool is closed, :meth:`stage` hands the image
on as it is, and the networks copy it as before: never a wait, never a frame changed under a
reader. On a CPU the frames are plain memory (CI runs the same code).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from livecam.core.types import ImageBGR


@dataclass
class _Pinned:
    tensor: torch.Tensor  # (H, W, 3) uint8, page-locked on CUDA
    array: np.ndarray  # the tensor's memory as numpy: the base of every view handed out
    baseline: int  # the array's reference count when nothing but the pool holds it
    event: Any = None  # the last upload's CUDA event (None: none in flight)


class PinnedFrames:
    """At most ``max_frames`` pinned frames (see the module docstring); ``pinned``: page-locked
    (CUDA) or plain host memory."""

    def __init__(self, *, pinned: bool, max_frames: int = 12) -> None:
        self.pinned = pinned
        self.max_frames = max(1, max_frames)
        self._lock = threading.Lock()
        self._frames: dict[int, _Pinned] = {}  # id(array) -> frame
        self._closed = False

    def stage(self, image: ImageBGR) -> ImageBGR:
        """``image`` copied into a free pinned frame: a read-only view of it; or ``image`` as it
        is when no frame is free (or the pool is closed). Called by the capture thread."""
        if image.dtype != np.uint8 or image.ndim != 3:
            return image
        frame = self._take(image.shape)
        if frame is None:
            return image
        np.copyto(frame.array, image)
        view = frame.array.view()
        view.flags.writeable = False
        return view

    def _take(self, shape: tuple[int, ...]) -> _Pinned | None:
        with self._lock:
            if self._closed:
                return None
            for key, frame in list(self._frames.items()):
                if not self._free(frame):
                    continue
                if frame.array.shape == shape:
                    return frame
                del self._frames[key]  # another size: the source changed, let it go
            if len(self._frames) >= self.max_frames:
                return None
            frame = self._new(shape)
            self._frames[id(frame.array)] = frame
            frame.baseline = sys.getrefcount(frame.array)  # held by the frame alone
            return frame

    def _new(self, shape: tuple[int, ...]) -> _Pinned:
        tensor = torch.empty(shape, dtype=torch.uint8, pin_memory=self.pinned)
        return _Pinned(tensor, tensor.numpy(), 0)

    @staticmethod
    def _free(frame: _Pinned) -> bool:
        if sys.getrefcount(frame.array) > frame.baseline:
            return False  # a frame (or a view, or a tensor of it) is still held somewhere
        return frame.event is None or bool(frame.event.query())

    def find(self, image: ImageBGR) -> tuple[torch.Tensor, Any] | None:
        """The pinned (H, W, 3) tensor that ``image`` is a whole view of, with a token for
        :meth:`uploaded`; None for any other image."""
        base = image.base
        if not isinstance(base, np.ndarray):
            return None
        with self._lock:
            frame = self._frames.get(id(base))
        if (frame is None or frame.array is not base or image.shape != base.shape
                or image.strides != base.strides
                or image.ctypes.data != base.ctypes.data):
            return None
        return frame.tensor, frame

    def uploaded(self, token: Any, stream: Any) -> None:
        """The upload from ``token``'s frame was queued on the CUDA ``stream``: the frame is not
        reused before the stream's work so far has completed (None: a CPU's copy, done)."""
        if stream is None:
            return
        if token.event is None:
            token.event = torch.cuda.Event()
        token.event.record(stream)

    def close(self) -> None:
        """Hand out no more frames (those still held stay valid until released)."""
        with self._lock:
            self._closed = True
            self._frames.clear()


def host_source(pool: PinnedFrames | None, image: ImageBGR, staging: torch.Tensor,
                staging_free: Any) -> tuple[torch.Tensor, Any]:
    """Where to upload ``image`` from: its pinned frame when it is one of ``pool``'s (and the
    token for :meth:`PinnedFrames.uploaded`), else ``staging`` (an (H, W, 3) pinned tensor)
    filled with it, once ``staging_free`` (the CUDA event after its last upload, or None) has
    completed (token None)."""
    found = None if pool is None else pool.find(image)
    if found is not None:
        return found
    if staging_free is not None:
        staging_free.synchronize()
    np.copyto(staging.numpy(), image)
    return staging, None

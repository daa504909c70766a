"""The follower's frames on the device: a small ring of them, loaded as frames are read.

A frame's *load* is its upload (through pinned staging) and the whole-frame detector started
on it. With a ring, the capture thread loads each frame as it reads it
(:meth:`~livecam.analysis.gpu.networks.GpuFaceNetworks.preload`), so the follower's thread,
which bounds one stream offline (docs/perf-notes.md, runs 65-69: about 0.8 ms of its 3.1 ms a
frame were this load and the wait for the detector), finds the frame already on the device and
its detections under way. A frame nobody loaded ahead (no slot was free, the feature is off, a
caller outside the pipeline) is loaded by the follower itself, as before.

A slot is *free*, *pending* (loaded, not yet claimed), *claimed* by the follower, then *kept*
while it is among the ``keep`` frames claimed last (the swap reads the frame on the device up
to that many frames later), then free again. A pending frame older than the one the follower
claims was dropped on the way (live mode keeps the newest frame) and is free again. The
capture thread takes a slot only while another one stays free, so the follower always finds
one. The GPU work that still reads a slot's last frame (``holds``, and the follower's ``done``
event) is waited for on the GPU before the slot is loaded again.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from livecam.analysis.gpu.calls import CapturedCall
from livecam.core.types import ImageBGR

#: Slots beyond the kept frames (the follower's current frame is one of those): offline, the
#: capture thread runs two frames ahead (one queued, one read and waiting to be queued), a
#: third may be read before the follower claims the first, and one stays free for the follower.
AHEAD = 4


class Slot:
    """One frame of the ring: its place in the ring's stacked device frames, pinned staging,
    the detector's graph reading that place and its outputs, and the events of its load."""

    def __init__(self, index: int, place: torch.Tensor, cuda: bool) -> None:
        self.index = index
        self.place = place  # (1, H, W, 3) uint8: frame ``index`` of the ring
        self.staging = torch.zeros(tuple(place.shape[1:]), dtype=torch.uint8, pin_memory=cuda)
        self.staging_np = self.staging.numpy()
        self.detect: CapturedCall | None = None
        self.det_out: tuple[torch.Tensor, ...] = ()
        self.det_host: tuple[torch.Tensor, ...] = ()
        self.loaded: Any = torch.cuda.Event() if cuda else None  # the upload is done
        self.detected: Any = torch.cuda.Event() if cuda else None  # detections are on the host
        self.done: Any = torch.cuda.Event() if cuda else None  # the follower's work on it
        self.holds: list[Any] = []  # other GPU work reading the frame (a deferred tile search)
        self.loading = threading.Lock()  # held while a thread queues this slot's load
        self.image: ImageBGR | None = None  # the frame it holds (None: free)
        self.seq = 0  # load order
        self.claim: int | None = None  # the follower's claim number (None: pending or free)


class FrameRing:
    """``size`` slots of ``height_px`` x ``width_px`` frames on ``device`` (see the module
    docstring); ``keep``: how many of the frames claimed last stay untouched. :meth:`take`
    may be called by any thread, :meth:`claim` by the follower's thread only."""

    def __init__(self, size: int, height_px: int, width_px: int, *, device: torch.device,
                 cuda: bool, keep: int) -> None:
        self.keep = max(1, keep)
        if size < self.keep + AHEAD:
            raise ValueError(f"a ring of {size} slots cannot keep {self.keep} frames and load "
                             f"ahead: it needs {self.keep + AHEAD}")
        self.frames = torch.zeros((size, height_px, width_px, 3), dtype=torch.uint8,
                                  device=device)
        self.slots = [Slot(i, self.frames[i:i + 1], cuda) for i in range(size)]
        self.closed = False
        self._lock = threading.Lock()
        self._claims = 0
        self._seq = 0

    def _reusable(self, slot: Slot) -> bool:
        if slot.loading.locked():
            return False
        if slot.image is None:
            return True
        return slot.claim is not None and self._claims - slot.claim > self.keep

    def _reserve(self, image: ImageBGR, spare: int) -> Slot | None:
        free = [s for s in self.slots if self._reusable(s)]
        if len(free) <= spare:
            return None
        slot = min(free, key=lambda s: s.seq)  # the one left alone longest
        slot.loading.acquire()
        self._seq += 1
        slot.image, slot.seq, slot.claim = image, self._seq, None
        return slot

    def take(self, image: ImageBGR) -> Slot | None:
        """A slot to load ``image`` into ahead of the follower, pending and locked for its
        load (the caller releases ``slot.loading`` once the load is queued), or None when
        that would leave no slot free for the follower (or the ring is closed)."""
        with self._lock:
            return None if self.closed else self._reserve(image, spare=1)

    def drop(self, slot: Slot) -> None:
        """Forget ``slot``'s pending frame (its load failed): the follower loads it itself."""
        with self._lock:
            if slot.claim is None:
                slot.image = None

    def claim(self, image: ImageBGR) -> tuple[Slot, bool]:
        """The follower's slot for ``image``: the one loaded ahead for it (True; wait on
        ``slot.loading`` before using it), else a free one, locked for the caller's own load
        (False; the caller releases ``slot.loading``). Frames loaded ahead before the one
        claimed and never claimed themselves are freed."""
        with self._lock:
            self._claims += 1  # the oldest kept frame is no longer kept
            slot = next((s for s in self.slots if s.image is image and s.claim is None), None)
            ahead = slot is not None
            if slot is None:
                slot = self._reserve(image, spare=0)
                if slot is None:  # the capture thread always leaves one: a bug if it did not
                    raise RuntimeError("no free slot in the follower's frame ring")
            for other in self.slots if ahead else ():
                # loaded before this one and never claimed: dropped on the way
                if other.claim is None and other.image is not None and other.seq < slot.seq:
                    other.image = None
            slot.claim = self._claims - 1
        return slot, ahead

    def close(self) -> None:
        """No more loads ahead; returns once the loads being queued are."""
        with self._lock:
            self.closed = True
        for slot in self.slots:
            with slot.loading:
                pass

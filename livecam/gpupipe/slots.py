"""GPU slots: what one tick in flight owns on the device, and the per-face arrays both ways.

A *tick* is one swap pass over up to ``n_frames`` frames (one per stream that had a frame
ready) with up to ``max_faces`` faces among them. A :class:`Slot` owns a CUDA stream, the
events that mark its progress, the device frames the swap reads and pastes into, and the
small per-face arrays (pinned on the host, and on the device), all sized once. Frames travel
between the device and each stream's own pinned buffers (:class:`FrameBuffers`), so a slot is
free again as soon as its tick's download is done, whatever the streams' consumers do.
Nothing is allocated per tick after :meth:`Slot.open`. A :class:`SlotRing` cycles through two
or more slots so that tick k+1 uploads and computes while tick k downloads.

On a CPU the same objects exist without streams, events or pinned memory, so the pipeline
code is exercised by the CPU tests. Only the thread that launches ticks (under the hub's
lock) touches a slot.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from livecam.analysis.keepgil import copy_into
from livecam.engines.cuda_streams import new_stream
from livecam.gpupipe.swap import keep

if TYPE_CHECKING:
    from livecam.gpupipe.rows import TickRows

KEYPOINTS = 5  # ArcFace order: the swap's alignment points

#: A hand mask (hands in front) on part of a frame: (y0, x0, (h, w) uint8, 255 = the frame's
#: own pixel), or float32 in [0, 1] as :func:`livecam.swap.occlusion.hand_alpha_box` gives it
#: (quantised on the stream's thread, :func:`quantised`).
HandBox = tuple[int, int, "np.ndarray"]


def quantised(box: HandBox) -> HandBox:
    """``box`` with its alpha as uint8 (what the slot's plane holds)."""
    y0, x0, alpha = box
    if alpha.dtype == np.uint8:
        return box
    return y0, x0, np.rint(alpha * np.float32(255.0)).astype(np.uint8)


@dataclass(frozen=True)
class SlotShape:
    """Sizes every slot is allocated for: ``n_frames`` frames per tick, ``height_px`` x
    ``width_px`` BGR, ``max_faces`` face rows per tick in all, ``latent_dim`` the generator's
    source latent size (from its input spec); ``hands``: a hand mask per frame
    (``swap.hands_in_front``)."""

    n_frames: int
    height_px: int
    width_px: int
    max_faces: int
    latent_dim: int
    hands: bool = False

    def __post_init__(self) -> None:
        if min(self.n_frames, self.height_px, self.width_px, self.max_faces,
               self.latent_dim) < 1:
            raise ValueError(f"every slot dimension must be >= 1, got {self}")


def _host(shape: tuple[int, ...], dtype: torch.dtype, pinned: bool) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype, pin_memory=pinned)


#: Byte alignment of each field inside a :class:`FaceRows` buffer (int64 views need 8).
_ALIGN = 16


@dataclass
class FaceRows:
    """Per-face tensors of one side (host or device); row i is face i of the tick.

    Inputs: ``frame_index`` (F,) int64 (the face's frame in the tick), ``kps`` (F, 5, 2)
    float32 px (ArcFace order), ``latents`` (F, D) float32, ``valid`` (F,) bool (False:
    padding, nothing is pasted), ``keep_xy`` (F, LOOPS, POINTS, 2) float32 px and
    ``keep_soft`` (F,) float32: the streamer's eyes and mouth kept
    (:class:`~livecam.gpupipe.swap.keep.KeepLoops`; zeros keep nothing). Output: ``fits`` (F,)
    bool (the paste-back window held the face's footprint).

    Every field is a typed view of one byte buffer, the inputs first and the output after
    them, so a tick's rows travel in one copy each way (six copies cost the hub's launching
    thread about 40 us of Python a tick). ``numpy`` holds the host side's fields as numpy
    views (made once: a ``Tensor.numpy()`` call per field per tick added up too).
    """

    frame_index: torch.Tensor
    kps: torch.Tensor
    latents: torch.Tensor
    valid: torch.Tensor
    keep_xy: torch.Tensor
    keep_soft: torch.Tensor
    fits: torch.Tensor
    buffer: torch.Tensor  # (bytes,) uint8: every field above is a view of it
    inputs_end: int  # bytes [0, inputs_end) hold the inputs, the rest ``fits``
    numpy: dict[str, np.ndarray]

    @classmethod
    def allocate(cls, max_faces: int, latent_dim: int, *, device: torch.device | None,
                 pinned: bool) -> FaceRows:
        f = max_faces
        layout = (("frame_index", (f,), torch.int64), ("kps", (f, KEYPOINTS, 2), torch.float32),
                  ("latents", (f, latent_dim), torch.float32),
                  ("keep_xy", (f, keep.LOOPS, keep.POINTS, 2), torch.float32),
                  ("keep_soft", (f,), torch.float32), ("valid", (f,), torch.bool),
                  ("fits", (f,), torch.bool))
        spans, end, inputs_end = {}, 0, 0
        for name, shape, dtype in layout:
            if name == "fits":
                inputs_end = end
            size = int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
            spans[name] = (end, size)
            end += -(-size // _ALIGN) * _ALIGN
        if device is None:
            buffer = _host((end,), torch.uint8, pinned)
        else:
            buffer = torch.zeros((end,), dtype=torch.uint8, device=device)
        fields = {name: buffer[spans[name][0]:sum(spans[name])].view(dtype).view(shape)
                  for name, shape, dtype in layout}
        views = {name: t.numpy() for name, t in fields.items()} if device is None else {}
        return cls(**fields, buffer=buffer, inputs_end=inputs_end, numpy=views)

    def write(self, rows: TickRows, bucket: int, pad_kps: np.ndarray) -> None:
        """Host side: ``rows`` into rows 0 .. n - 1, and padding rows (``pad_kps``, not
        valid: computed, never pasted) up to ``bucket``, the face count the tick runs. On the
        hub's launching thread every tick: the copies keep the GIL (see
        :mod:`livecam.analysis.keepgil`), where ``a[:n] = b`` would let numpy go of it."""
        fh, n = self.numpy, len(rows)
        for name, src in (("frame_index", rows.frame_index), ("kps", rows.kps),
                          ("latents", rows.latents), ("keep_xy", rows.keep_xy),
                          ("keep_soft", rows.keep_soft)):
            if src is None:
                fh[name][:n].fill(0)
            else:
                copy_into(fh[name][:n].reshape(-1), np.ravel(src))
        np.logical_or(rows.valid, False, out=fh["valid"][:n])
        if bucket > n:
            fh["frame_index"][n:bucket].fill(0)
            np.positive(pad_kps, out=fh["kps"][n:bucket])
            fh["valid"][n:bucket].fill(False)
            fh["keep_xy"][n:bucket].fill(0)

    def copy_inputs_from(self, other: FaceRows) -> None:
        """An asynchronous copy of every input field from ``other`` (pinned -> device)."""
        self.buffer[:self.inputs_end].copy_(other.buffer[:other.inputs_end], non_blocking=True)

    def copy_outputs_from(self, other: FaceRows) -> None:
        """An asynchronous copy of the output field from ``other`` (device -> pinned)."""
        self.buffer[self.inputs_end:].copy_(other.buffer[other.inputs_end:], non_blocking=True)


class _Handed:
    """The base of a frame :meth:`FrameBuffers.hand_out` hands out over a buffer's array (an
    object that is no array, so every view of the frame refers to the frame, which is watched;
    a view of a plain view of the buffer's array would refer to that array)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array  # the memory lives while the frame does
        self.__array_interface__ = array.__array_interface__


class FrameBuffers:
    """One stream's frames on the host: ``count`` pinned (on CUDA) (H, W, 3) uint8 buffers in
    and as many out, handed out in turn. The stream writes its frame into an ``inputs``
    buffer, the tick uploads from it and downloads the swapped frame into the ``outputs``
    buffer of the same index; the stream takes that buffer away when it collects
    (:meth:`hand_out`: a new one takes its place, no copy), and only then is the index used
    again. Owned by one stream's stage (``take`` on its pipeline thread, ``give_back`` and
    ``hand_out`` on its collector). ``inputs_numpy`` and ``outputs_numpy`` are the buffers'
    numpy views, made once: a ``Tensor.numpy()`` per frame makes a tensor object whose
    release lets go of the GIL."""

    def __init__(self, height_px: int, width_px: int, count: int, *, pinned: bool) -> None:
        shape = (height_px, width_px, 3)
        self._shape, self._pinned = shape, pinned
        #: the buffers handed out (:meth:`hand_out`) and their frames, reused once a frame
        #: is gone
        self._handed: list[tuple[torch.Tensor, np.ndarray, weakref.ref[np.ndarray]]] = []
        #: (height, width) of every buffer: a request's frame size, read by the hub for each
        #: waiting request at each launch (a tensor's shape read per request added up)
        self.size_hw = (height_px, width_px)
        self.inputs = [_host(shape, torch.uint8, pinned) for _ in range(count)]
        self.outputs = [_host(shape, torch.uint8, pinned) for _ in range(count)]
        self.inputs_numpy = [t.numpy() for t in self.inputs]
        self.outputs_numpy = [t.numpy() for t in self.outputs]
        self._free = list(range(count))
        self._lock = threading.Lock()

    def take(self) -> int:
        """A free index (raises when every buffer is in flight: the caller's bound broke)."""
        with self._lock:
            if not self._free:
                raise RuntimeError("every frame buffer of this stream is in flight")
            return self._free.pop(0)

    def give_back(self, index: int) -> None:
        with self._lock:
            self._free.append(index)

    def hand_out(self, index: int) -> np.ndarray:
        """The swapped frame in ``outputs[index]``, (H, W, 3) uint8, given to the caller
        (it was copied out before: a full frame a frame and stream), and ``index`` given
        back with another output buffer in its place: one whose frame was handed out before
        and is gone (the array handed out collected: nothing, not even a view of it, refers
        to it any more), else a new one (allocating lets go of the GIL; reusing does not).
        A frame handed out is written again only once the output has let go of it, and its
        download is long done then (it was collected)."""
        with self._lock:
            out = np.asarray(_Handed(self.outputs_numpy[index]))
            self._handed.append((self.outputs[index], self.outputs_numpy[index],
                                 weakref.ref(out)))
            fresh = self._unused()
        if fresh is None:
            tensor = torch.empty(self._shape, dtype=torch.uint8, pin_memory=self._pinned)
            fresh = (tensor, tensor.numpy())
        with self._lock:
            self.outputs[index], self.outputs_numpy[index] = fresh
            self._free.append(index)
        return out

    def _unused(self) -> tuple[torch.Tensor, np.ndarray] | None:
        """A buffer whose handed-out frame is gone, taken from the list (lock held)."""
        for k, (_, _, frame) in enumerate(self._handed):
            if frame() is None:
                tensor, array, _ = self._handed.pop(k)
                return tensor, array
        return None


@dataclass
class Slot:
    """One ring position (see the module docstring). Build with :meth:`open`."""

    index: int
    shape: SlotShape
    device: torch.device
    frames_dev: torch.Tensor  # (B, H, W, 3) uint8 on the device, swapped in place
    faces_host: FaceRows
    faces_dev: FaceRows
    stream: Any = None  # torch.cuda.Stream on CUDA
    generated: Any = None  # torch.cuda.Event: the generator's shared buffers are free again
    done: Any = None  # torch.cuda.Event (timing): outputs are in host memory
    # the memory pool every graph of this slot is captured into (torch.cuda.graph_pool_handle):
    # a slot runs one tick at a time, so its graphs never replay at once and share their
    # working memory (the slot holds its largest graph's, not the sum of all of them)
    graph_pool: Any = None
    capture_stream: Any = None  # the stream its graphs are captured on (the pool's blocks
    # are reused only by captures on the stream that freed them)
    started: Any = None  # torch.cuda.Event (timing): the upload was queued
    t_submit_ns: int = 0
    tick: int = -1
    # frames_dev[k] for each position k, made once (the per-tick copies take lists of them)
    frame_views: list[torch.Tensor] = field(default_factory=list)
    # (B, H, W) uint8 hand masks (shape.hands): 255 where a hand stays in front of the faces;
    # written on the host (pinned), uploaded with the frame, read by the paste-back
    hands_host: torch.Tensor | None = None
    hands_dev: torch.Tensor | None = None
    # position k's last mask: (y0, x0, h, w) of the box it wrote (host and device), or None
    _hands_box: list[tuple[int, int, int, int] | None] | None = None

    @classmethod
    def open(cls, index: int, shape: SlotShape, device: torch.device | str) -> Slot:
        device = torch.device(device)
        cuda = device.type == "cuda"
        frame_shape = (shape.n_frames, shape.height_px, shape.width_px, 3)
        slot = cls(
            index=index, shape=shape, device=device,
            frames_dev=torch.zeros(frame_shape, dtype=torch.uint8, device=device),
            faces_host=FaceRows.allocate(shape.max_faces, shape.latent_dim, device=None,
                                         pinned=cuda),
            faces_dev=FaceRows.allocate(shape.max_faces, shape.latent_dim, device=device,
                                        pinned=False))
        slot.frame_views = list(slot.frames_dev.unbind(0))
        if shape.hands:
            slot.hands_host = _host(frame_shape[:3], torch.uint8, cuda)
            slot.hands_dev = torch.zeros(frame_shape[:3], dtype=torch.uint8, device=device)
            slot._hands_box = [None] * shape.n_frames
        if cuda:
            slot.stream = new_stream(device)  # of its own: see livecam.engines.cuda_streams
            slot.generated = torch.cuda.Event()
            slot.graph_pool = torch.cuda.graph_pool_handle()
            slot.capture_stream = new_stream(device)
            slot.done = torch.cuda.Event(enable_timing=True)
            slot.started = torch.cuda.Event(enable_timing=True)
        return slot

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def on_stream(self) -> Any:
        """Context manager making this slot's stream current (a no-op on the CPU)."""
        if self.cuda:
            return torch.cuda.stream(self.stream)
        return contextlib.nullcontext()

    def upload(self, frames: list[torch.Tensor], ready: list[Any] | None = None,
               hands: list[HandBox | None] | None = None) -> None:
        """Queue copies of ``frames`` (frame k into position k: pinned host buffers, or device
        tensors the follower's networks kept, each copied after its ``ready`` event), of
        the per-face inputs and (``shape.hands``) of frame k's hand mask ``hands[k]``, on this
        slot's stream. Call only while the slot is not in flight (its host buffers are
        written here)."""
        with self.on_stream():
            if self.cuda:
                self.started.record(self.stream)
            for event in ready or ():
                if event is not None:
                    self.stream.wait_event(event)
            # one call for every frame: each torch call from Python gives the GIL up and
            # waits to get it back, which at 12 streams stretches a tick's launch
            torch._foreach_copy_(self.frame_views[:len(frames)], list(frames),
                                 non_blocking=True)
            self.faces_dev.copy_inputs_from(self.faces_host)
            if self.hands_dev is not None:
                # the tick's positions only: the slot is as deep as the largest tick
                # (advanced.gpu.max_frames_per_call), and a position's stale box is cleared when it
                # next carries a frame, before anything pastes there
                for k in range(len(frames)):
                    self._upload_hands(k, hands[k] if hands is not None and k < len(hands)
                                       else None)

    def _upload_hands(self, k: int, box: HandBox | None) -> None:
        """Position k's hand mask: the last box zeroed, ``box`` written, and the rows the two
        cover copied to the device (the rest of the plane stays zero on both sides), so a
        frame costs its boxes, not a whole 1080p plane (measured: the whole-plane fill, scale
        and copy held the hub's launching thread at 8 streams)."""
        assert self.hands_host is not None and self.hands_dev is not None
        assert self._hands_box is not None
        last = self._hands_box[k]
        if box is None and last is None:
            return
        plane = self.hands_host[k].numpy()
        rows = []
        if last is not None:
            ly, lx, lh, lw = last
            plane[ly:ly + lh, lx:lx + lw] = 0
            rows.append((ly, ly + lh))
        if box is not None:
            y0, x0, alpha = quantised(box)
            h, w = alpha.shape
            plane[y0:y0 + h, x0:x0 + w] = alpha
            rows.append((y0, y0 + h))
            self._hands_box[k] = (y0, x0, h, w)
        else:
            self._hands_box[k] = None
        r0, r1 = min(r[0] for r in rows), max(r[1] for r in rows)
        self.hands_dev[k, r0:r1].copy_(self.hands_host[k, r0:r1], non_blocking=True)

    def download(self, frames_host: list[torch.Tensor]) -> None:
        """Queue device -> host copies of positions 0.. into ``frames_host`` and of the
        per-face outputs, then mark done."""
        with self.on_stream():
            torch._foreach_copy_(list(frames_host), self.frame_views[:len(frames_host)],
                                 non_blocking=True)
            self.faces_host.copy_outputs_from(self.faces_dev)
            if self.cuda:
                self.done.record(self.stream)

    def wait(self) -> None:
        """Block the calling thread until this slot's outputs are in host memory."""
        if self.cuda:
            self.done.synchronize()

    def gpu_time_ms(self) -> float:
        """Device time from the start of the upload to the end of the download (after wait)."""
        if not self.cuda:
            return float("nan")
        return float(self.started.elapsed_time(self.done))


class SlotRing:
    """Two or more slots used in turn. ``next()`` returns the slot for the next tick."""

    def __init__(self, shape: SlotShape, device: torch.device | str, n_slots: int = 2) -> None:
        if n_slots < 2:
            raise ValueError(f"a slot ring needs at least 2 slots to overlap, got {n_slots}")
        self.slots = [Slot.open(i, shape, device) for i in range(n_slots)]
        self._next = 0

    def next(self) -> Slot:
        slot = self.slots[self._next]
        self._next = (self._next + 1) % len(self.slots)
        return slot

    def __len__(self) -> int:
        return len(self.slots)

"""GPU slots: everything one in-flight tick (a group of frames) owns on the host and device.

A :class:`Slot` owns a CUDA stream, the events that mark its progress, pinned host buffers
(frames in, frames out, small per-face arrays both ways) and the device buffers the frame
program reads and writes, all sized once for ``n_frames`` frames of ``height x width`` and
``max_faces`` face slots. Nothing is allocated per frame after :meth:`Slot.open`. A
:class:`SlotRing` cycles through two or more slots so that tick k+1 is uploaded and computed on
one stream while tick k is downloaded on another.

On a CPU the same objects exist without streams, events or pinned memory, so the pipeline code
is exercised by the CPU tests. Only the scheduler thread touches a slot.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch

from livecam.analysis.gpu.facemesh import NUM_LANDMARKS

LATENT_DIM = 512
ROI_FIELDS = 4  # centre x, centre y, size, rotation (rad)


@dataclass(frozen=True)
class SlotShape:
    """Sizes every slot is allocated for: ``n_frames`` frames per tick (one per stream),
    ``height_px`` x ``width_px`` BGR, ``max_faces`` face slots in total, ``max_detections``
    detector outputs per frame."""

    n_frames: int
    height_px: int
    width_px: int
    max_faces: int
    max_detections: int = 8

    def __post_init__(self) -> None:
        if min(self.n_frames, self.height_px, self.width_px, self.max_faces) < 1:
            raise ValueError(f"every slot dimension must be >= 1, got {self}")


def _host(shape: tuple[int, ...], dtype: torch.dtype, pinned: bool) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype, pin_memory=pinned)


@dataclass
class FaceBuffers:
    """Per-face tensors of one side (host or device); row i is face slot i.

    Inputs: ``frame_index`` (F,) int64, ``roi`` (F, 4) float32 (used where ``roi_override``),
    ``roi_override`` (F,) bool, ``latents`` (F, 512) float32, ``valid`` (F,) bool.
    Outputs: ``landmarks`` (F, 468, 3) float32 px, ``presence`` (F,) float32, ``roi_next``
    (F, 4) float32, ``fits`` (F,) bool (paste window was large enough), detections
    ``det_boxes`` (B, D, 4), ``det_scores`` (B, D), ``det_valid`` (B, D) bool.
    """

    frame_index: torch.Tensor
    roi: torch.Tensor
    roi_override: torch.Tensor
    latents: torch.Tensor
    valid: torch.Tensor
    landmarks: torch.Tensor
    presence: torch.Tensor
    roi_next: torch.Tensor
    fits: torch.Tensor
    det_boxes: torch.Tensor
    det_scores: torch.Tensor
    det_valid: torch.Tensor

    INPUTS = ("frame_index", "roi", "roi_override", "latents", "valid")
    OUTPUTS = ("landmarks", "presence", "roi_next", "fits", "det_boxes", "det_scores",
               "det_valid")

    @classmethod
    def allocate(cls, shape: SlotShape, *, device: torch.device | None,
                 pinned: bool) -> FaceBuffers:
        f, b, d = shape.max_faces, shape.n_frames, shape.max_detections

        def make(size: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            if device is None:
                return _host(size, dtype, pinned)
            return torch.zeros(size, dtype=dtype, device=device)

        return cls(
            frame_index=make((f,), torch.int64), roi=make((f, ROI_FIELDS), torch.float32),
            roi_override=make((f,), torch.bool), latents=make((f, LATENT_DIM), torch.float32),
            valid=make((f,), torch.bool),
            landmarks=make((f, NUM_LANDMARKS, 3), torch.float32),
            presence=make((f,), torch.float32), roi_next=make((f, ROI_FIELDS), torch.float32),
            fits=make((f,), torch.bool), det_boxes=make((b, d, 4), torch.float32),
            det_scores=make((b, d), torch.float32), det_valid=make((b, d), torch.bool))

    def copy_from(self, other: FaceBuffers, names: tuple[str, ...]) -> None:
        """Asynchronous copies of the named fields from ``other`` (pinned <-> device)."""
        for name in names:
            getattr(self, name).copy_(getattr(other, name), non_blocking=True)


@dataclass
class Slot:
    """One ring position (see the module docstring). Build with :meth:`open`."""

    index: int
    shape: SlotShape
    device: torch.device
    frames_in_host: torch.Tensor  # (B, H, W, 3) uint8, pinned on CUDA: the capture writes here
    frames_out_host: torch.Tensor  # (B, H, W, 3) uint8, pinned: the swapped frames land here
    frames_dev: torch.Tensor  # (B, H, W, 3) uint8 on the device, swapped in place
    faces_host: FaceBuffers
    faces_dev: FaceBuffers
    stream: Any = None  # torch.cuda.Stream on CUDA
    side_stream: Any = None  # torch.cuda.Stream: the detector, beside the mesh and the swap
    uploaded: Any = None  # torch.cuda.Event: inputs are on the device
    computed: Any = None  # torch.cuda.Event: the analysis has run (the ROI state is updated)
    detected: Any = None  # torch.cuda.Event: the detector (side stream) has run
    generated: Any = None  # torch.cuda.Event: the generator's shared buffers are free again
    done: Any = None  # torch.cuda.Event: outputs are in pinned host memory
    started: Any = None  # timing events (enable_timing) around the whole tick
    t_submit_ns: int = 0
    tick: int = -1
    busy: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, index: int, shape: SlotShape, device: torch.device | str) -> Slot:
        device = torch.device(device)
        cuda = device.type == "cuda"
        frame_shape = (shape.n_frames, shape.height_px, shape.width_px, 3)
        slot = cls(
            index=index, shape=shape, device=device,
            frames_in_host=_host(frame_shape, torch.uint8, cuda),
            frames_out_host=_host(frame_shape, torch.uint8, cuda),
            frames_dev=torch.zeros(frame_shape, dtype=torch.uint8, device=device),
            faces_host=FaceBuffers.allocate(shape, device=None, pinned=cuda),
            faces_dev=FaceBuffers.allocate(shape, device=device, pinned=False))
        if cuda:
            slot.stream = torch.cuda.Stream(device)
            slot.side_stream = torch.cuda.Stream(device)
            slot.uploaded = torch.cuda.Event()
            slot.computed = torch.cuda.Event()
            slot.detected = torch.cuda.Event()
            slot.generated = torch.cuda.Event()
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

    def upload(self) -> None:
        """Queue host -> device copies of the frames and per-face inputs on this slot's stream."""
        with self.on_stream():
            if self.cuda:
                self.started.record(self.stream)
            self.frames_dev.copy_(self.frames_in_host, non_blocking=True)
            self.faces_dev.copy_from(self.faces_host, FaceBuffers.INPUTS)
            if self.cuda:
                self.uploaded.record(self.stream)

    def download(self) -> None:
        """Queue device -> host copies of the frames and per-face outputs, then mark done."""
        with self.on_stream():
            self.frames_out_host.copy_(self.frames_dev, non_blocking=True)
            self.faces_host.copy_from(self.faces_dev, FaceBuffers.OUTPUTS)
            if self.cuda:
                self.done.record(self.stream)

    def wait(self) -> None:
        """Block the calling thread until this slot's outputs are in host memory."""
        if self.cuda:
            self.done.synchronize()

    def is_done(self) -> bool:
        return not self.cuda or bool(self.done.query())

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

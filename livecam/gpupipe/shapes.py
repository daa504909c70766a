"""What a GPU start compiles and captures, worked out before anything is: the shape plan.

Everything the GPU pipeline compiles (``torch.compile``: the face networks, the swap's
alignment and paste-back, the generator) or captures (CUDA graphs) is keyed by a few
buckets, never by the number of streams:

- **frames per call** (``advanced.gpu.max_frames_per_call``, cut to
  ``advanced.pipeline.max_streams``): a swap tick takes one frame of each stream that has one ready,
  at most this many; the streams' face detector takes as many frames a call. Calls run at 1, 2, 4,
  ... frames, padded up. The slots' device frames are this deep, whatever the number of streams.
- **faces per call** (``advanced.gpu.max_faces_per_call``, at least ``analysis.max_faces``): a
  tick's faces run the generator and paste-back at 0, 1, 2, 4, ... faces, padded up; more faces
  wait for the next tick. The swap's alignment compiles, per paste window, for one face and
  for any count from two up (``advanced.gpu.compile_dynamic_batches``; off: per bucket), the
  paste-back per bucket (its blend loops over the faces in order); the CUDA graphs are captured per
  bucket (cheap).
- **the streams' stacked frames**: every stream's frame has its place in one
  (``advanced.pipeline.max_streams``, H, W, 3) device tensor the detector and mesh read by index, so
  its depth is the configured ceiling, not the streams started (one stream too: a user who
  runs one stream and wants the memory back sets ``advanced.pipeline.max_streams: 1``).

:func:`plan_start` is what :func:`livecam.gpupipe.factory.build_hub`,
:func:`~livecam.gpupipe.factory.follower_networks`, the memory check
(:mod:`livecam.gpupipe.memory`) and ``livecam engines build`` read, so the shapes listed by
:meth:`ShapePlan.compiled_shapes` are the ones a start asks for. One stream and many run the
same face networks (:class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`, one stream's
calls batches of one) and the same swap, so the plan is one set whatever the number of
streams, and ``engines build`` prepares that set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from livecam.gpupipe.networks.dynamic_rows import DYNAMIC

if TYPE_CHECKING:
    from livecam.gpupipe.sections import GpuSettings

#: The most face regions one mesh call of the shared networks takes (more run as several).
MAX_MESH_BATCH = 64

#: the parts compiled with the face count dynamic (``advanced.gpu.compile_dynamic_batches``;
#: livecam.gpupipe.program.ALIGN_ROWS, livecam.gpupipe.networks.calls.load_mesh): not the
#: paste-back, whose blend loops over the faces
DYNAMIC_PARTS = ("swap alignment", "face mesh", "face detector")


def doubling(largest: int, *, start: int = 1) -> tuple[int, ...]:
    """``start``, then 1, 2, 4, ... up to and including ``largest`` (>= 1)."""
    out = [start, 1] if start == 0 else [1]
    while out[-1] < largest:
        out.append(min(out[-1] * 2, largest))
    return tuple(sorted(set(out)))


def bucket_at_least(n: int) -> int:
    """The power of two at or above ``n`` (>= 1)."""
    b = 1
    while b < n:
        b *= 2
    return b


def distinct_windows(windows_px: tuple[int, ...], height_px: int,
                     width_px: int) -> tuple[int, ...]:
    """``windows_px`` ascending, less those no larger than the one before once cut to the
    frame's smaller side (a 640 px window already covers a 480-line frame: 1088 adds nothing
    there)."""
    side = min(height_px, width_px)
    kept: list[int] = []
    for window in sorted(set(windows_px)):
        if not kept or min(window, side) > min(kept[-1], side):
            kept.append(window)
    return tuple(kept)


@dataclass(frozen=True)
class CompiledShape:
    """One compiled call: ``part`` (what is compiled) and ``inputs``, its static input shapes
    and sizes (a call compiles once per distinct ``inputs``)."""

    part: str
    inputs: tuple[object, ...]

    def __str__(self) -> str:
        return f"{self.part} {self.inputs}"

    def describe(self) -> str:
        """For people: ``swap paste-back (16,1080,1920,3) 2 faces 640 px``,
        ``generator 4 faces``."""
        words = [self.part]
        inputs = list(self.inputs)
        if inputs and isinstance(inputs[0], tuple):
            frames: tuple[object, ...] = inputs.pop(0)  # type: ignore[assignment]
            words.append("(" + ",".join(str(d) for d in frames) + ")")
        if inputs:
            words.append(f"{inputs.pop(0)} {_UNITS.get(self.part, 'rows')}")
        words += [f"{v} px" for v in inputs]
        return " ".join(words)


#: what the count of each compiled part's call is (:meth:`CompiledShape.describe`)
_UNITS = {"face detector": "frames", "face mesh": "regions", "swap alignment": "faces",
          "swap paste-back": "faces", "generator": "faces", "tile detector": "tiles"}


@dataclass(frozen=True)
class ShapePlan:
    """The sizes a GPU start allocates, compiles and captures for one frame size (see the
    module docstring). ``mesh_on_gpu``: the face mesh runs on the device (not with
    ``advanced.analysis.refine_landmarks``, whose 478-point mesh runs on the host)."""

    height_px: int
    width_px: int
    mesh_on_gpu: bool
    slots: int
    frames_per_call: int
    stack_frames: int
    faces_per_call: int
    max_rois: int
    windows_px: tuple[int, ...]
    generator_batches: tuple[int, ...]
    swap_compiled: bool
    networks_compiled: bool
    faces_dynamic: bool = False
    #: tiles of the GPU tile search at this frame size (one batch of them a call; 0: none)
    tiles: int = 0

    @property
    def face_buckets(self) -> tuple[int, ...]:
        """Faces per tick: 0, 1, 2, 4, ... up to :attr:`faces_per_call`."""
        return doubling(self.faces_per_call, start=0)

    def compiled_face_counts(self, part: str) -> tuple[int | str, ...]:
        """The face (region) counts ``part`` compiles for (the swap's parts per paste
        window): each bucket, or for the alignment and the mesh with :attr:`faces_dynamic`
        one and ``2+`` (any count from two up, one compiled call:
        :mod:`livecam.gpupipe.networks.dynamic_rows`)."""
        counts = {"face mesh": self.mesh_buckets, "face detector": self.frame_buckets}.get(
            part, self.face_buckets[1:])
        if part not in DYNAMIC_PARTS or not self.faces_dynamic or len(counts) < 2:
            return counts
        return (1, DYNAMIC)

    @property
    def frame_buckets(self) -> tuple[int, ...]:
        """Frames per detector call of the face networks: 1, 2, 4, ..."""
        return doubling(self.frames_per_call)

    @property
    def mesh_max(self) -> int:
        """The most regions one face-mesh call takes."""
        return min(MAX_MESH_BATCH, self.frames_per_call * self.max_rois)

    @property
    def mesh_buckets(self) -> tuple[int, ...]:
        """Regions per face-mesh call: 1, 2, 4, ... (none with the mesh on the host)."""
        return doubling(self.mesh_max) if self.mesh_on_gpu else ()

    def compiled_shapes(self) -> tuple[CompiledShape, ...]:
        """Every call this start compiles (with its knob on), in the order a start meets
        them."""
        h, w = self.height_px, self.width_px
        out: list[CompiledShape] = []
        if self.networks_compiled:
            frames = (self.stack_frames, h, w, 3)
            out += [CompiledShape("face detector", (frames, b))
                    for b in self.compiled_face_counts("face detector")]
            out += [CompiledShape("face mesh", (frames, b))
                    for b in self.compiled_face_counts("face mesh")]
            if self.tiles:
                out.append(CompiledShape("tile detector", ((1, h, w, 3), self.tiles)))
        if self.swap_compiled:
            frames = (self.frames_per_call, h, w, 3)
            for part in ("swap alignment", "swap paste-back"):
                out += [CompiledShape(part, (frames, b, window))
                        for b in self.compiled_face_counts(part) for window in self.windows_px]
        out += [CompiledShape("generator", (b,)) for b in self.generator_batches]
        return tuple(out)

    @property
    def swap_graphs(self) -> int:
        """CUDA graphs the swap captures: per slot, face bucket (0 has none) and window."""
        return self.slots * (len(self.face_buckets) - 1) * len(self.windows_px)

    @property
    def network_graphs(self) -> int:
        """CUDA graphs the face networks capture for this frame size."""
        return len(self.frame_buckets) + len(self.mesh_buckets)


@dataclass(frozen=True)
class CallSizes:
    """The sizes of :class:`ShapePlan` that no frame size changes: ``frames_per_call``,
    ``faces_per_call`` and ``stack_frames`` (see the module docstring)."""

    frames_per_call: int
    faces_per_call: int
    stack_frames: int


def call_sizes(config: GpuSettings) -> CallSizes:
    """The call sizes of ``config`` (the hub and the face networks are built with them)."""
    gpu = config.gpu
    ceiling = max(1, config.pipeline.max_streams)
    return CallSizes(
        frames_per_call=max(1, min(gpu.max_frames_per_call, bucket_at_least(ceiling))),
        faces_per_call=max(gpu.max_faces_per_call, config.analysis.max_faces, 1),
        stack_frames=ceiling)


def compiles_on(device: str) -> bool:
    """Whether the GPU pipeline compiles on ``device``: on CUDA only (its CPU runs are checks:
    they would spend minutes compiling for no gain)."""
    return device.startswith("cuda")


def plan_start(config: GpuSettings, *, width_px: int, height_px: int,
               device: str = "cuda") -> ShapePlan:
    """The shape plan of a GPU start of ``config`` at this frame size on ``device``
    (compiling happens on CUDA only): the same for any number of streams (see the module
    docstring)."""
    from livecam.analysis.detect import tiles
    from livecam.engines.torch_compiled import power_of_two_batches

    gpu, analysis = config.gpu, config.analysis
    sizes = call_sizes(config)
    windows = (gpu.paste_window_px,) + ((gpu.paste_window_large_px,)
                                        if gpu.paste_window_large_px > gpu.paste_window_px
                                        else ())
    batches = (tuple(sorted(set(config.engine.compiled_batch_sizes)))
               if config.engine.compiled_batch_sizes
               else power_of_two_batches(max(1, analysis.max_faces)))
    cuda = compiles_on(device)
    # a start compiles the generator only when told to (``auto`` without a build falls back
    # to CUDA graphs, ``compiled`` without one is refused): ``livecam engines build`` does it
    compiled_generator = (config.engine.torch_mode == "compiled"
                          and config.engine.build_if_missing)
    return ShapePlan(
        height_px=height_px, width_px=width_px,
        mesh_on_gpu=not analysis.refine_landmarks, slots=gpu.slots,
        frames_per_call=sizes.frames_per_call, stack_frames=sizes.stack_frames,
        faces_per_call=sizes.faces_per_call,
        max_rois=max(1, analysis.max_faces),
        windows_px=distinct_windows(windows, height_px, width_px),
        generator_batches=batches if compiled_generator else (),
        swap_compiled=cuda and gpu.compile_paste,
        faces_dynamic=gpu.compile_dynamic_batches,
        networks_compiled=cuda and gpu.compile_networks,
        tiles=len(tiles(width_px, height_px, analysis.tile_size_px)))

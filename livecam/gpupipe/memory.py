"""One memory plan for a GPU start: what N streams need, checked against a limit before
anything is compiled or captured.

:func:`estimate` adds up, from the shape plan (:mod:`livecam.gpupipe.shapes`), what a start
allocates on the device for one frame size: the slots' frames (``advanced.gpu.slots`` x frames per
call), the captured swap graphs' memory (the slots' graphs share one pool per slot, so a
slot holds its largest graph's working memory, not the sum: see
:mod:`livecam.gpupipe.graphs`), the face networks' frames (the shared stack of
``advanced.pipeline.max_streams`` frames, the edge search's pictures, and each stream's kept
frames: the one part that grows with the streams) and graphs, the generator's weights, and
the CUDA context. :func:`check_fits` refuses a start the limit cannot hold with one line that
names the limit and what to change.

The per-face working memory of a graph is a model, not a measurement of this machine:
``PASTE_BYTES_PER_WINDOW_PX`` (bytes per pixel of the paste window for each face, as
written and compiled: the uncompiled paste-back keeps a few hundred float32 temporaries of
the window alive in a graph's pool, Inductor fuses most away) and
``GENERATOR_BYTES_PER_FACE``. They are set from runs on the H200 (4 streams,
uncompiled: out of memory at 140 GB with graphs of up to 24 faces per slot and window, one
pool each); a start logs the estimate beside what torch reserved, so they can be corrected.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from livecam.analysis.edges import strip_places
from livecam.analysis.second_look import SECOND_LOOK_PX, SECOND_LOOK_SPANS
from livecam.core.errors import ConfigError
from livecam.gpupipe.shapes import ShapePlan

log = logging.getLogger(__name__)

GB = 1 << 30
MB = 1 << 20

#: working memory of one face's paste-back in a captured graph, bytes per window pixel:
#: (as written, compiled)
PASTE_BYTES_PER_WINDOW_PX = (400, 64)
#: the generator's activations for one face in a graph (inswapper_128 in fp16), bytes
GENERATOR_BYTES_PER_FACE = 48 * MB
#: one captured face-network call (its inputs, activations, outputs), bytes
NETWORK_GRAPH_BYTES = 48 * MB
#: the CUDA context, cuDNN/cuBLAS workspaces and the allocator's slack, bytes
CONTEXT_BYTES = 1 * GB


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a start needs on the device, by part (``parts``: name -> bytes)."""

    parts: tuple[tuple[str, int], ...]

    @property
    def total_bytes(self) -> int:
        return sum(b for _, b in self.parts)

    def describe(self) -> str:
        """The parts in GB, largest first, on one line."""
        ranked = sorted(self.parts, key=lambda p: -p[1])
        return ", ".join(f"{name} {b / GB:.1f}" for name, b in ranked if b >= 0.05 * GB)


def estimate(plan: ShapePlan, *, n_streams: int, keep_frames: int, hands: bool = False,
             model_bytes: int = 0) -> MemoryNeed:
    """What ``n_streams`` streams of frames of the plan's size need on the device
    (``keep_frames``: frames each stream's face networks keep for the swap; ``hands``: a hand
    mask per slot frame; ``model_bytes``: the generator's file size, fp32 weights, held in
    fp16)."""
    frame = plan.height_px * plan.width_px * 3
    slot_frames = plan.slots * plan.frames_per_call * (frame + (frame // 3 if hands else 0))
    per_px = PASTE_BYTES_PER_WINDOW_PX[1 if plan.swap_compiled else 0]
    side = min(plan.height_px, plan.width_px)
    largest = max(plan.face_buckets)
    per_face = max(per_px * min(w, side) ** 2 for w in plan.windows_px) \
        + GENERATOR_BYTES_PER_FACE
    graphs = plan.slots * largest * per_face  # one pool per slot: its largest graph
    stack = plan.stack_frames * frame
    # the edge search's pictures built on the device: each stream's strips (a place each:
    # a frame's are detected in one call) and a second look's (likewise)
    strips = sum(len(p.rows) * len(p.cols) for p in strip_places(plan.height_px, plan.width_px))
    looks = len(SECOND_LOOK_SPANS) * SECOND_LOOK_PX * SECOND_LOOK_PX
    pictures = plan.stack_frames * 3 * (strips + looks)
    kept = n_streams * keep_frames * frame
    networks = plan.network_graphs * NETWORK_GRAPH_BYTES
    return MemoryNeed((("swap slots' frames", slot_frames), ("swap graphs", graphs),
                       ("face networks' frames", stack + kept + pictures),
                       ("face network graphs", networks),
                       ("generator weights", model_bytes // 2), ("CUDA context", CONTEXT_BYTES)))


def card_bytes(device: str) -> int | None:
    """The device's memory, bytes (None off CUDA)."""
    if not device.startswith("cuda"):
        return None
    import torch

    return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)


def limit_bytes(memory_limit_gb: float, headroom_gb: float, device: str) -> int | None:
    """``advanced.gpu.memory_limit_gb`` in bytes, or with 0 the card's memory less
    ``advanced.gpu.memory_headroom_gb`` (None: no limit known, off CUDA with 0)."""
    if memory_limit_gb > 0:
        return int(memory_limit_gb * GB)
    card = card_bytes(device)
    return None if card is None else max(0, card - int(headroom_gb * GB))


def check_fits(need: MemoryNeed, limit: int | None, *, n_streams: int, plan: ShapePlan,
               limit_source: str) -> None:
    """Raise :class:`ConfigError` (one line naming the limit) when ``need`` exceeds
    ``limit``; log the plan otherwise."""
    size = f"{plan.width_px}x{plan.height_px}"
    if limit is None:
        log.info("GPU memory plan for %d stream(s) of %s: %.1f GB (%s); no limit known",
                 n_streams, size, need.total_bytes / GB, need.describe())
        return
    if need.total_bytes > limit:
        raise ConfigError(
            f"{n_streams} stream(s) of {size} frames need about {need.total_bytes / GB:.1f} GB "
            f"of GPU memory ({need.describe()}), more than the {limit / GB:.3g} GB of "
            f"{limit_source}: run fewer streams, lower advanced.gpu.max_faces_per_call, "
            "advanced.gpu.max_frames_per_call or advanced.gpu.slots, or raise "
            "advanced.gpu.memory_limit_gb")
    log.info("GPU memory plan for %d stream(s) of %s: %.1f of %.1f GB (%s)", n_streams, size,
             need.total_bytes / GB, limit / GB, need.describe())


def model_file_bytes(path: Path) -> int:
    """The generator file's size (0 when it is not there: the start reports that itself)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0

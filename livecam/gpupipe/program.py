"""The per-tick GPU work: align, crop, generate, colour, paste, enhance, all on the device.

:class:`SwapProgram` runs on one :class:`~livecam.gpupipe.slots.Slot`'s device buffers for a
static number of face rows (a *bucket*), so it can be captured in CUDA graphs per (slot,
bucket). The faces come from the face follower on the host (``livecam.analysis``: the same
follower, smoothing and selection as on the CPU path) as 5 ArcFace keypoints each; the
frames are already on the device. Its parts: :meth:`SwapProgram.prepare` (alignment, crops,
network input), :meth:`SwapProgram.generate` (one batched generator call for every face of
every frame) and :meth:`SwapProgram.finish` (optional colour match, insightface paste-back in
place, then the optional face enhancer on the pasted faces, as the CPU path orders them). The
generator call sits between two capturable halves so an engine that runs its own CUDA graph
(or no graph) can be used between two pipeline graphs; the enhancer's engine runs without
graphs of its own, inside the pipeline's (graphs do not nest).

Options that change what a tick does (each a static part of the captured program): pixel
boost (the swapper's ``pixel_boost_px``: larger crops, k * k tiles per face through the
generator), the enhancer (:class:`~livecam.gpupipe.swap.enhance.GpuFaceEnhancer`), and hands in
front (``hands``: the slot's hand masks scale both paste-backs' alpha, so a hand the host
found stays in front of the swapped and the enhanced face).

Compiled (``compile_dir``): the alignment with the crops, and the output's conversion with the
colour match and the paste-back, each go through ``torch.compile`` (Inductor fuses the
paste-back's few hundred small kernels, one face's tick spent most of its non-generator GPU
time launching them: ``scripts/bench_tick_parts.py --compile``), cached like the face
networks' code (:mod:`livecam.gpupipe.networks.compiled`); the pipeline captures the compiled
calls in its CUDA graphs. Each paste window compiles the paste-back once per face-count
bucket and the alignment once for one face and, with ``dynamic_faces``, once for any count
from two up (:mod:`livecam.gpupipe.networks.dynamic_rows`; without it, once per bucket), at
start.

Only the per-face ``fits`` flags go back besides the frames. The caller makes the slot's
stream current; nothing here synchronises with the host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import torch

from livecam.gpupipe.networks.compiled import maybe_compiled
from livecam.gpupipe.slots import Slot
from livecam.gpupipe.swap.enhance import GpuFaceEnhancer
from livecam.gpupipe.swap.keep import KeepLoops
from livecam.gpupipe.swap.neural import GpuInswapper
from livecam.gpupipe.swap.paste import mask_fits_window

#: the arguments of :func:`align_crops` (after the swapper) whose first dimension counts the
#: faces; the frames and the window are not per face. The paste-back has none: it blends one
#: face after the other (a later face over an earlier one, as on the CPU), a loop over the
#: count that its compiled code unrolls, so each face-count bucket compiles on its own
#: (checked on the CPU: tests/gpupipe/test_compiled_program.py)
ALIGN_ROWS = (1, 2)


class Staged(NamedTuple):
    """What the generator and the paste-back need for N faces: ``frame_index`` (N,),
    ``matrices`` (N, 2, 3) frame -> crop, ``crops`` (N, s, s, 3) BGR, ``blob`` (N k k, 3,
    s / k, s / k) network input, ``latents`` (N, D), ``valid`` (N,) bool, ``kps`` (N, 5, 2)
    the keypoints (the enhancer aligns its own crop from them), ``enhance`` (N,) bool: valid
    and the enhancer's paste window holds the face; ``window_px`` the paste window of this
    tick (one of the program's windows: a tick whose faces all fit a smaller one costs less)."""

    frame_index: torch.Tensor
    matrices: torch.Tensor
    crops: torch.Tensor
    blob: torch.Tensor
    latents: torch.Tensor
    valid: torch.Tensor
    kps: torch.Tensor
    enhance: torch.Tensor
    window_px: int
    keep: KeepLoops | None = None


def align_crops(swapper: GpuInswapper, frames: torch.Tensor, frame_index: torch.Tensor,
                kps: torch.Tensor, window_px: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The alignment matrices, crops, generator input and whether each face fits
    ``window_px``, for :meth:`SwapProgram.prepare` (compiled there or not)."""
    matrices, crops = swapper.crops(frames, frame_index, kps)
    fits = mask_fits_window(matrices, swapper.crop_px, window_px)
    return matrices, crops, swapper.blob(crops), fits


def paste_faces(swapper: GpuInswapper, frames: torch.Tensor, frame_index: torch.Tensor,
                pred: torch.Tensor, crops: torch.Tensor, matrices: torch.Tensor,
                valid: torch.Tensor, hands: torch.Tensor | None, keep: KeepLoops | None,
                window_px: int) -> None:
    """The generator's output to uint8 faces, the colour match and the paste-back into
    ``frames`` in place, for :meth:`SwapProgram.finish` (compiled there or not)."""
    faces = swapper.colour_match(swapper.to_faces(pred), crops)
    swapper.paste_(frames, frame_index, faces, matrices, valid, hands_bhw_u8=hands, keep=keep,
                   window_px=window_px)


class BoundPart(torch.nn.Module):
    """``fn(swapper, *args)`` as a module: compiled, torch saves a module's calls whole, so a
    later start loads them instead of tracing them again
    (:mod:`livecam.gpupipe.networks.precompiled`)."""

    def __init__(self, fn: Any, swapper: GpuInswapper) -> None:
        super().__init__()
        self.fn = fn
        self.swapper = swapper

    def forward(self, *args: Any) -> Any:
        return self.fn(self.swapper, *args)


class SwapProgram:
    """The swap on device tensors (see the module docstring). ``swapper``: an open
    :class:`GpuInswapper`; ``enhancer``: an open :class:`GpuFaceEnhancer` or None; ``hands``:
    paste behind the slots' hand masks (the slots must be allocated with ``hands``); each
    face's loops (the slots' ``keep_xy`` rows: kept eyes and mouth, the outline) shape every
    paste-back;
    ``compile_dir``: compile the parts around the generator, their code cached there (None:
    as written); ``dynamic_faces``: the alignment compiled with the face count dynamic from
    two faces up (one compile a window for every bucket above one)."""

    def __init__(self, swapper: GpuInswapper, enhancer: GpuFaceEnhancer | None = None, *,
                 hands: bool = False,
                 compile_dir: Path | None = None, dynamic_faces: bool = False) -> None:
        self.swapper = swapper
        self.enhancer = enhancer
        self.hands = hands
        device = swapper.template.device.type if swapper.template is not None else "cpu"
        self._align = maybe_compiled(BoundPart(align_crops, swapper), compile_dir,
                                     "swap's alignment and crops", device_type=device,
                                     knob="advanced.gpu.compile_paste", part="swap alignment",
                                     rows_args=ALIGN_ROWS if dynamic_faces else ())
        self._paste = maybe_compiled(BoundPart(paste_faces, swapper), compile_dir,
                                     "swap's paste-back", device_type=device,
                                     knob="advanced.gpu.compile_paste", part="swap paste-back")

    @property
    def latent_dim(self) -> int:
        """The generator's source latent size, from its input spec."""
        return self.swapper.latent_dim

    def prepare(self, slot: Slot, n_faces: int, *,
                window_px: int | None = None) -> Staged | None:
        """Keypoints in the slot's buffers to the generator's input, for the first
        ``n_faces`` rows (also sets each row's ``fits`` in ``window_px``, None: the
        swapper's own window)."""
        if n_faces == 0:
            return None
        n = n_faces
        fd = slot.faces_dev
        sw = self.swapper
        window = window_px or sw.window_px
        index = fd.frame_index[:n]
        matrices, crops, blob, fits = self._align(slot.frames_dev, index, fd.kps[:n], window)
        fd.fits[:n].copy_(fits)
        kps, valid = fd.kps[:n], fd.valid[:n]
        enhance = valid if self.enhancer is None else valid & self.enhancer.fits(kps, window)
        keep = KeepLoops(fd.keep_xy[:n], fd.keep_soft[:n])
        return Staged(index, matrices, crops, blob, fd.latents[:n], valid, kps, enhance, window,
                      keep)

    def generate(self, staged: Staged, stream: Any = None) -> torch.Tensor:
        """One generator call for every face: (N, 3, s, s) prediction in [0, 1]."""
        return self.swapper.predict(staged.blob, staged.latents, stream)

    def finish(self, slot: Slot, staged: Staged, pred: torch.Tensor) -> None:
        """Output to uint8 faces, colour match, paste-back into the frames in place, then the
        enhancer on the pasted faces (behind the hands, with ``hands``)."""
        hands = slot.hands_dev if self.hands else None
        if self.hands and hands is None:
            raise RuntimeError("SwapProgram(hands=True) on a slot without hand masks")
        self._paste(slot.frames_dev, staged.frame_index, pred, staged.crops, staged.matrices,
                    staged.valid, hands, staged.keep, staged.window_px)
        if self.enhancer is not None:
            self.enhancer.enhance_(slot.frames_dev, staged.frame_index, staged.kps,
                                   staged.enhance, hands_bhw_u8=hands, keep=staged.keep,
                                   paste_window_px=staged.window_px)

    def run(self, slot: Slot, n_faces: int, *, window_px: int | None = None) -> None:
        """The whole tick eagerly (or inside one capture), pasting in ``window_px``."""
        staged = self.prepare(slot, n_faces, window_px=window_px)
        if staged is not None:
            self.finish(slot, staged, self.generate(staged))

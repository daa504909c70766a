"""Build the GPU swap program around open engines.

:func:`build_program` wraps an already-open torch-side generator engine in a
:class:`~livecam.gpupipe.swap.neural.GpuInswapper` on the engine's device (and an open enhancer
engine, when there is one, in a :class:`~livecam.gpupipe.swap.enhance.GpuFaceEnhancer`) and returns
the :class:`~livecam.gpupipe.program.SwapProgram`. Call from the thread that will launch ticks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from livecam.gpupipe.program import SwapProgram
from livecam.gpupipe.swap.enhance import GpuFaceEnhancer, enhancer_window_px
from livecam.gpupipe.swap.neural import GpuInswapper


@dataclass(frozen=True)
class EnhancerOptions:
    """The face enhancer of the GPU pipeline (``swap.enhancer``): its crop ``size_px`` and
    ``template`` from its manifest, ``blend`` and ``fidelity`` from ``advanced.swap.enhancer_blend``
    / ``advanced.swap.enhancer_fidelity``."""

    size_px: int = 512
    template: str = "ffhq_512"
    blend: float = 0.8
    fidelity: float = 0.5


def build_program(engine: Any, *, device: torch.device | str, window_px: int = 640,
                  colour_blur_px: float = 0.0, crop_px: int = 128,
                  template: str = "arcface_128", mean: float = 0.0,
                  std: float = 255.0, pixel_boost_px: int | None = None,
                  enhancer_engine: Any = None,
                  enhancer: EnhancerOptions | None = None,
                  hands: bool = False,
                  compile_dir: Path | None = None, dynamic_faces: bool = False) -> SwapProgram:
    """The swap program on ``device``.

    ``engine`` is open, lives on ``device`` and offers ``run_torch`` (``TorchEngine``). With
    ``cuda_graphs=True`` the engine replays its own graph between the pipeline's two graphs
    (see :mod:`livecam.gpupipe.graphs`). ``window_px``: paste-back window side (must exceed the
    largest face's crop footprint); ``colour_blur_px`` > 0 adds a low-frequency colour match;
    ``crop_px``, ``template``, ``mean``, ``std`` as the model's manifest says;
    ``pixel_boost_px`` (``advanced.swap.pixel_boost``): the swap's crop size, a multiple of
    ``crop_px``. ``enhancer_engine`` (open, on ``device``, no CUDA graphs of its own) with
    ``enhancer``: the face enhancer after the paste-back, its paste window sized from ``window_px``
    (the same largest face), or from the tick's own paste window when that is another one.
    ``hands``: paste behind the slots' hand masks (each face's loops, the slots' ``keep_xy``
    rows, always shape the paste-backs); ``compile_dir``: compile the
    parts around the generator, their code cached there, with ``dynamic_faces`` the
    alignment's face count dynamic from two up (see :class:`SwapProgram`).
    """
    boost = pixel_boost_px if pixel_boost_px and pixel_boost_px != crop_px else None
    swapper = GpuInswapper(engine, crop_px=crop_px, template=template, mean=mean, std=std,
                           window_px=window_px, colour_blur_px=colour_blur_px,
                           pixel_boost_px=boost)
    swapper.open(torch.device(device))
    restorer = None
    if enhancer_engine is not None:
        options = enhancer or EnhancerOptions()
        window_for = functools.partial(enhancer_window_px, crop_px=crop_px, template=template,
                                       size_px=options.size_px,
                                       enhancer_template=options.template)
        restorer = GpuFaceEnhancer(
            enhancer_engine, size_px=options.size_px, template=options.template,
            blend=options.blend, fidelity=options.fidelity, window_px=window_for(window_px),
            window_for=window_for)
        restorer.open(torch.device(device))
    return SwapProgram(swapper, restorer, hands=hands, compile_dir=compile_dir,
                       dynamic_faces=dynamic_faces)

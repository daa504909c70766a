"""Build the GPU swap program around an open generator engine.

:func:`build_program` wraps an already-open torch-side generator engine in a
:class:`~livecam.swap.gpu.neural.GpuInswapper` on the engine's device and returns the
:class:`~livecam.gpupipe.program.SwapProgram`. Call from the thread that will launch ticks.
"""

from __future__ import annotations

from typing import Any

import torch

from livecam.gpupipe.program import SwapProgram
from livecam.swap.gpu.neural import GpuInswapper


def build_program(engine: Any, *, device: torch.device | str, window_px: int = 640,
                  colour_blur_px: float = 0.0, crop_px: int = 128,
                  template: str = "arcface_128", mean: float = 0.0,
                  std: float = 255.0) -> SwapProgram:
    """The swap program on ``device``.

    ``engine`` is open, lives on ``device`` and offers ``run_torch`` (``TorchEngine``). With
    ``cuda_graphs=True`` the engine replays its own graph between the pipeline's two graphs
    (see :mod:`livecam.gpupipe.graphs`). ``window_px``: paste-back window side (must exceed the
    largest face's crop footprint); ``colour_blur_px`` > 0 adds a low-frequency colour match;
    ``crop_px``, ``template``, ``mean``, ``std`` as the model's manifest says.
    """
    swapper = GpuInswapper(engine, crop_px=crop_px, template=template, mean=mean, std=std,
                           window_px=window_px, colour_blur_px=colour_blur_px)
    swapper.open(torch.device(device))
    return SwapProgram(swapper)

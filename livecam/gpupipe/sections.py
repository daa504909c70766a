"""The config sections the GPU pipeline reads, handed to it by the composition root.

:class:`GpuSections` is what :func:`livecam.gpupipe.factory.build_gpu_stages` and
:func:`~livecam.gpupipe.factory.build_hub` take in place of the whole config (``livecam.app``
makes it); :class:`GpuSettings` is the part of it that the pipeline's sizing helpers
(:func:`~livecam.gpupipe.shapes.plan_start`, the compile folders) read, which a whole config
also has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from livecam.config.analysis import AnalysisConfig
from livecam.config.engine import EngineConfig, ModelsConfig
from livecam.config.gpu import GpuConfig
from livecam.config.schema import PipelineConfig
from livecam.config.swap import SwapConfig


class GpuSettings(Protocol):
    """The sections the GPU pipeline's sizing helpers read (a :class:`GpuSections` or a
    whole config)."""

    @property
    def swap(self) -> SwapConfig: ...

    @property
    def engine(self) -> EngineConfig: ...

    @property
    def gpu(self) -> GpuConfig: ...

    @property
    def analysis(self) -> AnalysisConfig: ...

    @property
    def pipeline(self) -> PipelineConfig: ...


@dataclass(frozen=True)
class GpuSections:
    """The sections of one config that the GPU pipeline reads: ``swap`` (model, paste-back,
    enhancer, hands), ``engine`` (device, precision, torch mode), ``models`` (where the model
    files are), ``gpu`` (slots, graphs, memory), ``analysis`` (the face follower),
    ``pipeline`` (``realtime``, ``max_streams``), and ``fps``, ``capture.fps`` (the follower's
    filter step). Immutable; equal sections make an equal value (the shared pipeline's key)."""

    swap: SwapConfig
    engine: EngineConfig
    models: ModelsConfig
    gpu: GpuConfig
    analysis: AnalysisConfig
    pipeline: PipelineConfig
    fps: float


def require_sections(sections: object, builder: str) -> GpuSections:
    """``sections`` when it is a :class:`GpuSections`, else :class:`TypeError` (a whole
    config is refused: the composition root hands the GPU pipeline its sections)."""
    if not isinstance(sections, GpuSections):
        raise TypeError(f"{builder} takes the GPU pipeline's sections (livecam.app."
                        f"gpu_sections(config)), not {type(sections).__name__}")
    return sections

"""Choosing and building the all-GPU stage for ``livecam run`` (see :mod:`.stage`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from livecam.engines.protocol import TensorSpec
from livecam.gpupipe.stage import GpuSwapStage

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.core.stage import AnyStage
    from livecam.engines.torch_engine import TorchEngine
    from livecam.identity.model import IdentitySource
    from livecam.swap.neural_models import NeuralModels

log = logging.getLogger(__name__)


def gpu_pipeline_wanted(config: Config) -> bool:
    """Whether ``livecam run`` should use :func:`build_gpu_stages` for this config:
    ``swap.mode: neural`` and ``gpu.pipeline`` always, or auto with a CUDA GPU visible to torch
    and ``engine.backend`` auto or torch (the pipeline runs the generator with torch; a backend
    named in the config is not swapped for another). auto imports torch to ask."""
    if config.swap.mode != "neural" or config.gpu.pipeline == "never":
        return False
    if config.gpu.pipeline == "always":
        return True
    if config.engine.device == "cpu" or config.engine.backend not in ("auto", "torch"):
        return False
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def build_gpu_stages(config: Config, identities: IdentitySource, *, shared: Any = None,
                     stream: int = 0) -> list[AnyStage]:
    """``[GpuSwapStage]`` for ``swap.mode: neural`` from the config (cheap; nothing opened).

    The generator (``swap.model``) runs with the torch engine that
    :meth:`NeuralModels.generator_engine` makes for the GPU pipeline (``engine.device``,
    ``engine.torch_mode``: the packages ``livecam engines build`` compiled, else CUDA graphs;
    fp32 on a CPU); ArcFace (the model's recognizer) runs on the configured engine backend,
    once per identity photo, cached on disk as the CPU neural stage does. Both files are
    verified in ``open()``: a missing or corrupt one raises :class:`ModelError` naming
    ``livecam models fetch``. ``identities`` loads identities by name (the library, or an
    ``IdentityCollection``).
    """
    from livecam.analysis import build_selector
    from livecam.swap.neural_models import NeuralModels
    from livecam.track.settings import load_bytetrack_settings

    models = NeuralModels.from_config(config)
    # the pipeline's own CUDA graphs hold the generator (graphs do not nest); that was the
    # fastest mode on the H200 (perf-notes, device run 4: 438 vs 418 fps)
    generator = _LazyGenerator(models, pipeline_graphs=config.gpu.cuda_graphs)
    log.info("GPU pipeline: %s (torch, %s, engine.torch_mode %s) with %s", models.swapper.name,
             models.gpu_device(), config.engine.torch_mode, models.recognizer.name)
    stage = GpuSwapStage(
        generator, models.swapper_path, models.embeddings(identities.load), gpu=config.gpu,
        detect_every_n_frames=config.analysis.detect_every_n_frames,
        tracker_settings=load_bytetrack_settings(config.analysis.tracker_file),
        require_models=models.require,
        missing_log_interval_s=config.swap.missing_log_interval_s, assign=config.swap.assign,
        selector=build_selector(config.analysis))
    return [stage]


class _LazyGenerator:
    """The generator engine, made in ``open`` (after the stage's ``require_models`` check, so
    a missing model is reported as such; making it verifies the file's sha256, which keys the
    compiled packages) and then standing in for it: the stage and the GPU program use
    ``device``, ``inputs``, ``outputs``, ``cuda_graphs`` and ``run_torch``. Only the
    pipeline thread uses it."""

    def __init__(self, models: NeuralModels, *, pipeline_graphs: bool) -> None:
        self._models = models
        self._pipeline_graphs = pipeline_graphs
        self._engine: TorchEngine | None = None

    @property
    def engine(self) -> TorchEngine:
        if self._engine is None:
            raise RuntimeError("the generator engine is not open: call open() first")
        return self._engine

    def open(self) -> None:
        if self._engine is None:
            self._engine = self._models.gpu_generator(pipeline_graphs=self._pipeline_graphs)
        self._engine.open()
        log.info("GPU pipeline generator: %s", self._engine.mode)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()

    @property
    def device(self) -> Any:
        return self.engine.device

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.engine.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.engine.outputs

    @property
    def cuda_graphs(self) -> bool:
        return self.engine.cuda_graphs

    def run_torch(self, feeds: Mapping[str, Any], stream: Any = None) -> dict[str, Any]:
        return self.engine.run_torch(feeds, stream)

"""Choosing and building the all-GPU stage for ``livecam run`` (see :mod:`.stage`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from livecam.gpupipe.stage import GpuSwapStage

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.core.stage import Stage
    from livecam.identity.model import IdentitySource

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


def build_gpu_stages(config: Config, identities: IdentitySource) -> list[Stage]:
    """``[GpuSwapStage]`` for ``swap.mode: neural`` from the config (cheap; nothing opened).

    The generator (``swap.model``) runs with the torch engine on ``engine.device`` (auto: CUDA
    when torch sees a GPU, else the CPU, in fp32 there); ArcFace (the model's recognizer) runs
    on the configured engine backend, once per identity photo, cached on disk as the CPU neural
    stage does. Both files are verified in ``open()``: a missing or corrupt one raises
    :class:`ModelError` naming ``livecam models fetch``. ``identities`` loads identities by
    name (the library, or an ``IdentityCollection``).
    """
    from livecam.analysis import build_selector
    from livecam.analysis.landmarks import five_point
    from livecam.engines.registry import (
        choose_backend,
        create_engine,
        engine_cache_dir,
        model_store,
    )
    from livecam.engines.torch_engine import TorchEngine
    from livecam.swap.arcface import ArcFaceEmbedder, IdentityEmbeddings
    from livecam.track.settings import load_bytetrack_settings

    engine_cfg = config.engine
    store = model_store(config.models)
    swapper = store.manifest(config.swap.model)
    recognizer = store.manifest(swapper.recognizer or "w600k_r50")
    device = engine_cfg.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = engine_cfg.precision if device.startswith("cuda") else "fp32"
    # When the pipeline captures its own CUDA graphs the generator runs inside them (graphs do
    # not nest); that was the fastest mode on the H200 (perf-notes, device run 4: 438 vs 418 fps)
    own_graphs = engine_cfg.cuda_graphs and not (config.gpu.cuda_graphs and device != "cpu")
    generator = TorchEngine(store.path(swapper.name), device=device, precision=precision,
                            cuda_graphs=own_graphs)

    def require_models() -> None:
        for name in (swapper.name, recognizer.name):
            store.require(name)

    class _Embeddings:
        """The recognizer engine is built and opened on the first identity asked for."""

        def __init__(self) -> None:
            self._inner: IdentityEmbeddings | None = None

        def __call__(self, name: str) -> np.ndarray | None:
            if self._inner is None:
                digest = store.verify(recognizer.name)
                choice = choose_backend(engine_cfg.backend, engine_cfg.device)
                embedder = ArcFaceEmbedder(
                    create_engine(recognizer, store.path(recognizer.name), digest, engine_cfg,
                                  choice),
                    size_px=recognizer.crop_size_px or 112, mean=recognizer.mean,
                    std=recognizer.std)
                embedder.open()
                self._inner = IdentityEmbeddings(
                    embedder, identities.load, five_point, recognizer_id=digest,
                    cache_dir=engine_cache_dir(engine_cfg).parent / "embeddings")
            return self._inner(name)

    log.info("GPU pipeline: %s (torch, %s, %s) with %s", swapper.name, device, precision,
             recognizer.name)
    stage = GpuSwapStage(
        generator, store.path(swapper.name), _Embeddings(), gpu=config.gpu,
        detect_every_n_frames=config.analysis.detect_every_n_frames,
        tracker_settings=load_bytetrack_settings(config.analysis.tracker_file),
        require_models=require_models,
        missing_log_interval_s=config.swap.missing_log_interval_s, assign=config.swap.assign,
        selector=build_selector(config.analysis))
    return [stage]

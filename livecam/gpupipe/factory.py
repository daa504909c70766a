"""Choosing and building the GPU stages for ``livecam run`` (see :mod:`.stage`, :mod:`.hub`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from livecam.engines.protocol import TensorSpec

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.core.stage import AnyStage
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.hub import GpuSwapHub
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
    """The stages of one stream for ``swap.mode: neural`` on the GPU (cheap; nothing opened):
    the analysis stage (the face follower of ``analysis``) and a
    :class:`~livecam.gpupipe.stage.GpuSwapStage` on the GPU swap that ``shared``
    (:class:`livecam.app.SharedStages`) holds for every stream of the process (None: a GPU
    swap of its own, for one stream).

    The generator (``swap.model``) runs with the torch engine that
    :meth:`NeuralModels.gpu_generator` makes (``engine.device``, ``engine.torch_mode``: the
    packages ``livecam engines build`` compiled, else CUDA graphs; fp32 on a CPU); ArcFace (the
    model's recognizer) runs on the configured engine backend, once per identity photo, cached
    on disk as the CPU neural stage does. Both files are verified when the first stream opens:
    a missing or corrupt one raises :class:`ModelError` naming ``livecam models fetch``.
    ``identities`` loads identities by name (the library, or an ``IdentityCollection``).
    """
    from livecam.analysis import build_stages as build_analysis_stages
    from livecam.gpupipe.stage import GpuSwapStage
    from livecam.swap.cover import FaceCover
    from livecam.swap.neural_models import NeuralModels

    key = ("gpu-swap", config.swap, config.engine, config.models, config.gpu,
           config.analysis.max_faces, identities)
    if shared is None:
        hub = build_hub(config, identities, n_streams=1)
    else:
        hub = shared.get(key, lambda: build_hub(config, identities,
                                                n_streams=shared.n_streams))
    device = NeuralModels.from_config(config).gpu_device()
    networks, search = follower_networks(config, device)
    analysis = build_analysis_stages(config, realtime=config.pipeline.realtime,
                                     networks=networks, search=search)
    return [*analysis, GpuSwapStage(hub, stream=stream, assign=config.swap.assign,
                                    device_frame=getattr(networks, "device_frame", None),
                                    cover=FaceCover.from_config(config.swap))]


def follower_networks(config: Config, device: str) -> tuple[Any, Any]:
    """The face follower's networks and tile search for the GPU pipeline on ``device``:
    BlazeFace and the face mesh as torch ports on a CUDA device (:class:`GpuFaceNetworks`,
    keeping the uploaded frames for the swap) and every tile searched in one batch on the same
    uploaded frame (:class:`GpuTileSearch`), or (None, None): the CPU's MediaPipe networks,
    faster there."""
    if not device.startswith("cuda"):
        return None, None
    from livecam.analysis.gpu.networks import GpuFaceNetworks
    from livecam.analysis.gpu.tiles import GpuTileSearch
    from livecam.track.settings import load_bytetrack_settings

    analysis = config.analysis
    floor = load_bytetrack_settings(analysis.tracker_file).low_score_threshold
    networks = GpuFaceNetworks(device=device, detector_model=analysis.detector_model,
                               min_score=floor, precision=config.gpu.precision,
                               max_rois=max(1, analysis.max_faces),
                               refine_landmarks=analysis.refine_landmarks,
                               use_graphs=config.gpu.cuda_graphs,
                               keep_frames=config.gpu.slots + 2)
    search = GpuTileSearch(networks, tile_size_px=analysis.tile_size_px,
                           whole_frame=not analysis.detect_each_frame)
    return networks, search


def build_hub(config: Config, identities: IdentitySource, *, n_streams: int) -> GpuSwapHub:
    """The GPU swap for ``n_streams`` streams of ``config`` (not opened)."""
    from livecam.gpupipe.hub import GpuSwapHub
    from livecam.swap.neural import read_emap
    from livecam.swap.neural_models import NeuralModels

    models = NeuralModels.from_config(config)
    # the pipeline's own CUDA graphs hold the generator (graphs do not nest); that was the
    # fastest mode on the H200 (perf-notes, device run 4: 438 vs 418 fps)
    generator = _LazyGenerator(models, pipeline_graphs=config.gpu.cuda_graphs)
    manifest = models.swapper
    log.info("GPU swap: %s (torch, %s, engine.torch_mode %s) with %s, %d stream(s)",
             manifest.name, models.gpu_device(), config.engine.torch_mode,
             models.recognizer.name, n_streams)
    return GpuSwapHub(
        generator, emap=lambda: read_emap(models.swapper_path),
        source_embedding=models.embeddings(identities.load), n_streams=n_streams,
        max_faces=config.analysis.max_faces, slots=config.gpu.slots,
        use_graphs=config.gpu.cuda_graphs, window_px=config.gpu.paste_window_px,
        colour_blur_px=config.gpu.colour_blur_px,
        model_options={"crop_px": manifest.crop_size_px or 128,
                       "template": manifest.template or "arcface_128",
                       "mean": manifest.mean, "std": manifest.std},
        require_models=models.require,
        missing_log_interval_s=config.swap.missing_log_interval_s)


class _LazyGenerator:
    """The generator engine, made in ``open`` (after the stage's ``require_models`` check, so
    a missing model is reported as such; making it verifies the file's sha256, which keys the
    compiled packages) and then standing in for it: the hub and the GPU program use
    ``device``, ``inputs``, ``outputs``, ``cuda_graphs`` and ``run_torch``. Only the thread
    that launches ticks runs it."""

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

"""The neural swap's models for one config, shared by the CPU stage and the GPU pipeline.

:class:`NeuralModels` is what both :func:`livecam.swap.neural.build_neural_stage` and
:func:`livecam.gpupipe.factory.build_gpu_stages` build from: the swapper named by
``swap.model`` and its recognizer (manifests, files checked against them), the engine backend
chosen for ``engine``, the generator engine (:meth:`generator_engine`: one rule for the torch
mode, the compiled batch sizes and the device) and the identities' embedding cache. Building
it only reads manifests; model files are verified by :meth:`require` and when an engine is
first needed. ``livecam engines build`` compiles exactly the generator these make.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from livecam.config.engine import EngineConfig, ModelsConfig
from livecam.core.errors import ConfigError
from livecam.engines.lazy import LazyEngine
from livecam.engines.manifest import ModelManifest
from livecam.engines.protocol import Engine
from livecam.engines.registry import BackendChoice, choose_backend, create_engine
from livecam.engines.store import ModelStore

if TYPE_CHECKING:
    from livecam.engines.torch_engine import TorchEngine
    from livecam.swap.arcface import IdentityEmbeddings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NeuralModels:
    """The swapper and recognizer of one config and how they run (cheap; see the module).

    ``max_batch`` is the most faces the CPU path sends per generator call, ``max_faces`` the
    GPU pipeline's; they size the compiled batches unless ``advanced.engine.compiled_batch_sizes``
    is set. Any thread may read it; engines it makes belong to the thread that opens them.
    """

    store: ModelStore
    swapper: ModelManifest
    recognizer: ModelManifest
    engine: EngineConfig
    max_faces: int = 4

    @classmethod
    def from_sections(cls, models: ModelsConfig, engine: EngineConfig, *, model: str,
                      max_faces: int = 4) -> NeuralModels:
        """The swapper ``model`` (pass ``config.swap.model``) of the ``models`` section, run
        as the ``engine`` section says; ``max_faces`` is ``analysis.max_faces``. Raises
        :class:`TypeError` for anything but these two sections (never the whole config: the
        composition root, :mod:`livecam.app`, hands each builder its sections), and
        :class:`ConfigError` listing the swapper manifests available when the name is not one
        of them."""
        from livecam.engines.registry import model_store

        if not isinstance(models, ModelsConfig) or not isinstance(engine, EngineConfig):
            raise TypeError("NeuralModels.from_sections takes the config's models and engine "
                            f"sections (config.models, config.engine), not "
                            f"{type(models).__name__} and {type(engine).__name__}")
        store = model_store(models)
        name = model
        swappers = sorted(n for n, m in store.manifests.items() if m.kind == "swapper")
        if name not in swappers:
            where = models.manifests_dir or "the bundled engines/"
            raise ConfigError(f"swap.model: {name!r} is not a swapper manifest in {where} "
                              f"(available: {', '.join(swappers) or 'none'}; see "
                              "`livecam models list`)")
        swapper = store.manifest(name)
        recognizer_name = swapper.recognizer or "w600k_r50"
        if recognizer_name not in store.manifests:
            raise ConfigError(f"model manifest {name}: its recognizer {recognizer_name!r} has "
                              "no manifest beside it")
        for size in engine.compiled_batch_sizes:
            if size < 1:
                raise ConfigError(f"advanced.engine.compiled_batch_sizes: {size} is not a batch "
                                  "size (use whole numbers from 1)")
        return cls(store, swapper, store.manifest(recognizer_name), engine, max_faces=max_faces)

    def require(self) -> None:
        """Both model files present and verified; else :class:`ModelError` naming
        ``livecam models fetch``."""
        for name in (self.swapper.name, self.recognizer.name):
            self.store.require(name)
        if self.engine.backend == "triton":
            # a server that does not serve the recognizer fails the start, not a later frame
            probe = self.lazy_recognizer()
            probe.open()
            probe.close()

    @property
    def swapper_path(self) -> Path:
        return self.store.path(self.swapper.name)

    def backend(self) -> BackendChoice:
        """``engine.backend`` resolved here (auto: tensorrt, torch on CUDA, onnxruntime)."""
        return choose_backend(self.engine.backend, self.engine.device)

    def generator_batch_sizes(self, *, gpu_pipeline: bool) -> tuple[int, ...]:
        """The generator batch sizes to compile: ``advanced.engine.compiled_batch_sizes``, or 1, 2,
        4, ... up to what the path sends per call."""
        from livecam.engines.torch_compiled import power_of_two_batches

        if self.engine.compiled_batch_sizes:
            return tuple(sorted(set(self.engine.compiled_batch_sizes)))
        return power_of_two_batches(self.max_faces if gpu_pipeline else self.engine.max_batch)

    def generator_engine(self, *, gpu_pipeline: bool, pipeline_graphs: bool = False) -> Engine:
        """The unopened swap generator engine (the file is verified here).

        The GPU pipeline (``gpu_pipeline``) always runs it with torch on ``advanced.engine.device``
        (auto: CUDA when torch sees one), fp32 on a CPU; with ``pipeline_graphs`` the engine
        captures no CUDA graphs of its own (the pipeline captures it inside its own). The CPU
        path runs it on the configured backend.
        """
        if gpu_pipeline:
            return self.gpu_generator(pipeline_graphs=pipeline_graphs)
        digest = self.store.verify(self.swapper.name)
        return create_engine(self.swapper, self.swapper_path, digest, self.engine,
                             self.backend(),
                             batch_sizes=self.generator_batch_sizes(gpu_pipeline=False))

    def gpu_generator(self, *, pipeline_graphs: bool) -> TorchEngine:
        """:meth:`generator_engine` of the GPU pipeline (always a torch engine)."""
        from livecam.engines.registry import create_torch_engine

        digest = self.store.verify(self.swapper.name)
        batches = self.generator_batch_sizes(gpu_pipeline=True)
        device = self.gpu_device()
        precision = self.engine.precision if device.startswith("cuda") else "fp32"
        # graphs do not nest: inside the pipeline's graphs the engine captures none itself
        own_graphs = not (pipeline_graphs and device != "cpu")
        return create_torch_engine(self.swapper, self.swapper_path, digest, self.engine,
                                   device=device, precision=precision, cuda_graphs=own_graphs,
                                   batch_sizes=batches)

    def gpu_device(self) -> str:
        """``advanced.engine.device`` with auto resolved the way the GPU pipeline resolves it."""
        device = self.engine.device
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        return device

    def lazy_generator(self) -> Engine:
        """:meth:`generator_engine` for the CPU path, built (and the file verified) in
        ``open`` so that a missing model is reported when the stage opens."""
        return LazyEngine(self.backend().name, lambda: self.generator_engine(
            gpu_pipeline=False))

    def lazy_recognizer(self) -> Engine:
        """The recognizer engine on the configured backend, built in ``open``."""
        choice = self.backend()

        def make() -> Engine:
            digest = self.store.verify(self.recognizer.name)
            return create_engine(self.recognizer, self.store.path(self.recognizer.name),
                                 digest, self.engine, choice)

        return LazyEngine(choice.name, make)

    def embeddings(self, load_identity: Callable[[str], Any]
                   ) -> Callable[[str], np.ndarray | None]:
        """``name -> (512,) ArcFace embedding or None`` for identities from
        ``load_identity``; the recognizer is opened on the first name asked for and the
        embeddings cached on disk beside the engine cache."""
        return _Embeddings(self, load_identity)


class _Embeddings:
    """The recognizer is built and opened on the first identity asked for (pipeline thread)."""

    def __init__(self, models: NeuralModels, load_identity: Callable[[str], Any]) -> None:
        self._models = models
        self._load_identity = load_identity
        self._inner: IdentityEmbeddings | None = None

    def __call__(self, name: str) -> np.ndarray | None:
        if self._inner is None:
            from livecam.analysis.landmarks import five_point
            from livecam.engines.registry import engine_cache_dir
            from livecam.swap.arcface import ArcFaceEmbedder, IdentityEmbeddings

            models = self._models
            recognizer = models.recognizer
            embedder = ArcFaceEmbedder(models.lazy_recognizer(),
                                       size_px=recognizer.crop_size_px or 112,
                                       mean=recognizer.mean, std=recognizer.std)
            embedder.open()
            self._inner = IdentityEmbeddings(
                embedder, self._load_identity, five_point,
                recognizer_id=models.store.verify(recognizer.name),
                cache_dir=engine_cache_dir(models.engine).parent / "embeddings")
        return self._inner(name)

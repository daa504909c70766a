"""The TensorRT backend: FP16 engines built from ONNX, cached on disk, run on the caller's stream.

Building is a few small steps, each its own function (parse -> configure -> build -> save), and
takes minutes for inswapper-sized models, so ``livecam engines build`` does it ahead of time with
progress; :meth:`TensorRTEngine.open` only builds when ``build_if_missing`` is set. Buffers are
torch CUDA tensors; TensorRT 10's ``execute_async_v3`` runs on the stream the caller passes.

Nothing here runs on a machine without TensorRT and a CUDA GPU; the cache-key logic it relies on
(:mod:`livecam.engines.engine_cache`) is tested everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from livecam.core.errors import DependencyError, ModelError
from livecam.engines.engine_cache import EngineCache, EngineKey, Profile
from livecam.engines.protocol import EngineBase, TensorSpec, check_feeds

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]  # (phase, step, total)


def import_tensorrt() -> Any:
    """Import tensorrt or raise :class:`DependencyError` saying what to install."""
    try:
        import tensorrt
    except ImportError as exc:
        raise DependencyError("engine.backend tensorrt needs TensorRT: pip install tensorrt "
                              "(NVIDIA GPU and driver required), or use engine.backend: torch"
                              ) from exc
    return tensorrt


def gpu_identity(device_index: int = 0) -> tuple[str, str]:
    """(GPU name, compute capability "major.minor") of a CUDA device, via torch."""
    import torch

    if not torch.cuda.is_available():
        raise DependencyError("TensorRT needs a CUDA GPU and a CUDA build of torch")
    major, minor = torch.cuda.get_device_capability(device_index)
    return torch.cuda.get_device_name(device_index), f"{major}.{minor}"


def make_key(model_sha256: str, precision: str, profiles: tuple[Profile, ...],
             fp32_layers: tuple[str, ...] = (), device_index: int = 0) -> EngineKey:
    trt = import_tensorrt()
    name, capability = gpu_identity(device_index)
    return EngineKey(model_sha256=model_sha256, gpu_name=name, compute_capability=capability,
                     tensorrt_version=str(trt.__version__), precision=precision,
                     profiles=profiles, fp32_layers=fp32_layers)


def parse_onnx(trt: Any, onnx_path: Path, logger: Any) -> tuple[Any, Any, Any]:
    builder = trt.Builder(logger)
    flags = 0
    explicit = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
    if explicit is not None:  # TensorRT 8; always explicit (and deprecated) in 10
        flags = 1 << int(explicit)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ModelError(f"TensorRT cannot parse {onnx_path.name}: {errors}")
    return builder, network, parser


def configure(trt: Any, builder: Any, network: Any, *, precision: str,
              profiles: tuple[Profile, ...], workspace_mb: int, fp32_layers: tuple[str, ...],
              timing_cache: bytes | None, progress: ProgressFn | None) -> Any:
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)
    if precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    if fp32_layers:  # per-model precision overrides: layers whose name contains a pattern
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            if any(pattern in layer.name for pattern in fp32_layers):
                layer.precision = trt.float32
                for j in range(layer.num_outputs):
                    layer.set_output_type(j, trt.float32)
    for profile in profiles:
        opt_profile = builder.create_optimization_profile()
        for name, lo, opt, hi in profile.shapes:
            opt_profile.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(opt_profile)
    cache = config.create_timing_cache(timing_cache or b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    if progress is not None and hasattr(trt, "IProgressMonitor"):
        config.progress_monitor = _progress_monitor(trt, progress)
    return config


def _progress_monitor(trt: Any, progress: ProgressFn) -> Any:
    class Monitor(trt.IProgressMonitor):
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            progress(phase_name, 0, num_steps)

        def step_complete(self, phase_name: str, step: int) -> bool:
            progress(phase_name, step + 1, 0)
            return True  # False would cancel the build

        def phase_finish(self, phase_name: str) -> None:
            progress(phase_name, -1, 0)

    return Monitor()


def build_engine(onnx_path: Path, *, cache: EngineCache, model_name: str, key: EngineKey,
                 workspace_mb: int = 4096, progress: ProgressFn | None = None) -> bytes:
    """Parse, configure, build and atomically save an engine for ``key``; returns its bytes.

    The timing cache is read before the build and merged back under the cache's file lock.
    """
    trt = import_tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder, network, _parser = parse_onnx(trt, Path(onnx_path), logger)
    timing = cache.timing_cache_path.read_bytes() if cache.timing_cache_path.is_file() else None
    profiles = key.profiles if _has_dynamic_input(network) else ()
    if key.profiles and not profiles:
        log.warning("%s has only static inputs: its optimisation profiles are not used",
                    model_name)
    config = configure(trt, builder, network, precision=key.precision, profiles=profiles,
                       workspace_mb=workspace_mb, fp32_layers=key.fp32_layers,
                       timing_cache=timing, progress=progress)
    log.info("building a TensorRT %s engine for %s (this takes minutes)", key.precision,
             model_name)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ModelError(f"TensorRT failed to build {model_name}; run with --log-level DEBUG "
                         "for TensorRT's messages")
    data = bytes(serialized)
    built_cache = config.get_timing_cache()

    def merge(current: bytes | None) -> bytes:
        if current:
            on_disk = config.create_timing_cache(current)
            on_disk.combine(built_cache, True)
            return bytes(on_disk.serialize())
        return bytes(built_cache.serialize())

    cache.merge_timing_cache(merge)
    cache.save(model_name, key, data)
    return data


def _has_dynamic_input(network: Any) -> bool:
    return any(-1 in tuple(network.get_input(i).shape) for i in range(network.num_inputs))


class TensorRTEngine(EngineBase):
    """Runs a cached TensorRT engine (see the module docstring).

    ``model_sha256`` is the verified hash of ``model_path`` (part of the cache key). With
    ``build_if_missing`` False, a missing engine is an error naming ``livecam engines build``.
    """

    backend = "tensorrt"

    def __init__(self, model_path: str | Path, *, model_name: str, model_sha256: str,
                 cache_dir: str | Path, precision: str = "fp16",
                 profiles: tuple[Profile, ...] = (), fp32_layers: tuple[str, ...] = (),
                 workspace_mb: int = 4096, build_if_missing: bool = False,
                 progress: ProgressFn | None = None, device_index: int = 0) -> None:
        self.model_path = Path(model_path)
        self.model_name = model_name
        self.model_sha256 = model_sha256
        self.cache = EngineCache(cache_dir)
        self.precision = precision
        self.profiles = profiles
        self.fp32_layers = fp32_layers
        self.workspace_mb = workspace_mb
        self.build_if_missing = build_if_missing
        self.progress = progress
        self.device_index = device_index
        self._engine: Any = None
        self._context: Any = None
        self._out_buffers: dict[tuple[str, tuple[int, ...]], Any] = {}

    def open(self) -> None:
        if self._engine is not None:
            return
        trt = import_tensorrt()
        key = make_key(self.model_sha256, self.precision, self.profiles, self.fp32_layers,
                       self.device_index)
        self.cache.tidy()  # what builds killed mid-write left
        data = self.cache.load(self.model_name, key)
        if data is None:
            if not self.build_if_missing:
                raise ModelError(f"no TensorRT engine for {self.model_name} on this GPU, "
                                 f"TensorRT and precision: run `livecam engines build "
                                 f"{self.model_name}` first (minutes), or set "
                                 "advanced.engine.build_if_missing: true to build at start")
            data = build_engine(self.model_path, cache=self.cache, model_name=self.model_name,
                                key=key, workspace_mb=self.workspace_mb, progress=self.progress)
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self._engine = runtime.deserialize_cuda_engine(data)
        if self._engine is None:
            raise ModelError(f"TensorRT could not load the cached engine for {self.model_name}; "
                             f"run `livecam engines clear` and build again")
        self._context = self._engine.create_execution_context()
        specs_in: list[TensorSpec] = []
        specs_out: list[TensorSpec] = []
        for i in range(self._engine.num_io_tensors):
            name = self._engine.get_tensor_name(i)
            shape = tuple(int(d) if d >= 0 else "N" for d in self._engine.get_tensor_shape(name))
            spec = TensorSpec(name, shape, "float16" if self._engine.get_tensor_dtype(name)
                              == trt.DataType.HALF else "float32")
            is_input = self._engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            (specs_in if is_input else specs_out).append(spec)
        self._inputs, self._outputs = tuple(specs_in), tuple(specs_out)

    def close(self) -> None:
        self._out_buffers.clear()
        self._context = None
        self._engine = None

    def run_torch(self, feeds: Mapping[str, Any], stream: Any = None) -> dict[str, Any]:
        """Run on CUDA tensors on ``stream`` (torch.cuda.Stream; None = current); not waited for.

        Outputs are buffers owned by the engine, reused by the next call with the same shape.
        """
        import torch

        dtypes = {"float16": torch.float16, "float32": torch.float32}
        keep = []
        for spec in self._inputs:
            t = feeds[spec.name].to(dtypes[spec.dtype]).contiguous()
            keep.append(t)
            self._context.set_input_shape(spec.name, tuple(t.shape))
            self._context.set_tensor_address(spec.name, t.data_ptr())
        outs = {}
        for spec in self._outputs:
            shape = tuple(self._context.get_tensor_shape(spec.name))
            buf = self._out_buffers.get((spec.name, shape))
            if buf is None:
                buf = torch.empty(shape, dtype=dtypes[spec.dtype],
                                  device=f"cuda:{self.device_index}")
                self._out_buffers[(spec.name, shape)] = buf
            self._context.set_tensor_address(spec.name, buf.data_ptr())
            outs[spec.name] = buf
        handle = (stream or torch.cuda.current_stream(self.device_index)).cuda_stream
        if not self._context.execute_async_v3(handle):
            raise ModelError(f"TensorRT failed to run {self.model_name}")
        return outs

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        check_feeds(self._inputs, feeds)
        device = f"cuda:{self.device_index}"
        tensors = {k: torch.from_numpy(np.ascontiguousarray(v)).to(device)
                   for k, v in feeds.items()}
        outs = self.run_torch(tensors)
        torch.cuda.synchronize(self.device_index)
        return {k: v.float().cpu().numpy() for k, v in outs.items()}

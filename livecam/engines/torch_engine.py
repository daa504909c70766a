"""The torch backend: the ONNX graph executed by torch, fp16 and CUDA graphs on a GPU, or
compiled by ``livecam engines build`` (:mod:`livecam.engines.torch_compiled`).

The GPU pipeline calls :meth:`TorchEngine.run_torch` with device tensors on its own CUDA
stream; :meth:`TorchEngine.run` is the host-array convenience every backend has. On a CPU the
same code runs eagerly or compiled (tests, parity checks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from livecam.core.errors import DependencyError, ModelError
from livecam.engines.cuda_streams import new_stream
from livecam.engines.protocol import EngineBase, TensorSpec, check_feeds
from livecam.engines.torch_compiled import CompileOptions

log = logging.getLogger(__name__)


@dataclass
class _Captured:
    graph: Any  # torch.cuda.CUDAGraph
    static_inputs: list[Any]
    static_outputs: tuple[Any, ...]


def _specs(values: Any) -> tuple[TensorSpec, ...]:
    from onnx import TensorProto

    out = []
    for v in values:
        dims: list[int | str] = []
        for d in v.type.tensor_type.shape.dim:
            dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or "N"))
        elem = v.type.tensor_type.elem_type
        dtype = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16"}.get(elem, str(elem))
        out.append(TensorSpec(v.name, tuple(dims), dtype))
    return tuple(out)


class TorchEngine(EngineBase):
    """Runs an ONNX file with torch (see :mod:`livecam.engines.torch_graph`).

    - ``device``: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``.
    - ``precision``: ``"fp16"`` computes in float16 (weights converted at load), ``"fp32"``.
    - ``cuda_graphs``: capture one CUDA graph per input shape on first use and replay it after;
      only on CUDA. Outputs of a replay live in the graph's static buffers and are overwritten by
      the next call with the same shape: copy them before then.
    - ``channels_last``: NHWC memory layout for 4-D tensors (faster fp16 convolutions on GPUs).
    - ``fuse``: replace decomposed instance-norm / AdaIN chains by one fused op (fewer kernels;
      see :mod:`livecam.engines.torch_fuse`).
    - ``compile``: run the generator ``livecam engines build`` compiled into the engine cache
      for this model, device, torch and precision (:class:`CompileOptions`); a start takes it
      from Inductor's cache in seconds and compiles here only with
      ``compile.build_if_missing``. Without a build the engine falls back to the executor
      (CUDA graphs / eager), or fails when ``compile.required``. ``cuda_graphs`` still applies
      on top (the compiled graphs are replayed inside the engine's own CUDA graph).
      :attr:`mode` says what runs.

    Only the pipeline thread calls ``run``/``run_torch``.
    """

    backend = "torch"

    def __init__(self, model_path: str | Path, *, device: str = "auto", precision: str = "fp16",
                 cuda_graphs: bool = True, channels_last: bool | None = None,
                 fuse: bool = True, compile: CompileOptions | None = None) -> None:
        if precision not in ("fp16", "fp32"):
            raise ValueError(f"precision must be fp16 or fp32, got {precision!r}")
        self.model_path = Path(model_path)
        self.requested_device = device
        self.precision = precision
        self.cuda_graphs = cuda_graphs
        self.channels_last = channels_last
        self.fuse = fuse
        self.compile = compile
        self.compiled = False
        self._module: Any = None
        self._device: Any = None
        self._graphs: dict[tuple[tuple[int, ...], ...], _Captured] = {}

    @property
    def device(self) -> Any:
        """The torch.device the model runs on (after ``open``)."""
        return self._device

    @property
    def mode(self) -> str:
        """What runs after ``open``: compiled (+ CUDA graphs), CUDA graphs, or eager."""
        graphs = self.cuda_graphs and self._device is not None and self._device.type == "cuda"
        if self.compiled:
            return "compiled + CUDA graphs" if graphs else "compiled"
        return "CUDA graphs" if graphs else "eager"

    @property
    def float_dtype(self) -> Any:
        import torch

        return torch.float16 if self.precision == "fp16" else torch.float32

    def open(self) -> None:
        if self._module is not None:
            return
        try:
            import torch
        except ImportError as exc:
            raise DependencyError("the torch engine needs torch: pip install 'livecam[torch]' "
                                  "(a CUDA build for GPUs)") from exc
        from livecam.engines.torch_graph import load_onnx

        device = self.requested_device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise DependencyError("advanced.engine.device is cuda but torch sees no CUDA GPU: "
                                  "install a CUDA build of torch, or set advanced.engine.device: "
                                  "cpu")
        self._device = torch.device(device)
        try:
            model = load_onnx(self.model_path)
        except Exception as exc:  # onnx raises DecodeError and friends
            raise ModelError(f"cannot read ONNX model {self.model_path}: {exc}") from exc
        initializer_names = {i.name for i in model.graph.initializer}
        self._inputs = _specs([i for i in model.graph.input if i.name not in initializer_names])
        self._outputs = _specs(model.graph.output)
        if self._device.type == "cuda" and self.precision == "fp32":
            # fp32 means IEEE fp32: torch's default TF32 convolutions differ from onnxruntime
            # by ~1e-3 (measured on the H200). These flags are process-wide in torch.
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        if self.compile is not None:
            self._module, self.compiled = self._open_compiled(model)
        else:
            self._module = self._executor(model)
        log.debug("torch engine opened %s on %s (%s, %s)", self.model_path.name, self._device,
                  self.precision, self.mode)

    def _executor(self, model: Any) -> Any:
        """The ONNX executor on the device, in the compute dtype and layout."""
        import torch

        from livecam.engines.torch_graph import OnnxGraphModule

        module = OnnxGraphModule(model, float_dtype=self.float_dtype, fuse=self.fuse).eval()
        if self._use_channels_last:
            for name, buf in list(module.named_buffers()):
                if buf.dim() == 4 and buf.dtype.is_floating_point:
                    setattr(module, name, buf.contiguous(memory_format=torch.channels_last))
        return module.to(self._device)

    def _open_compiled(self, model: Any) -> tuple[Any, bool]:
        """(the compiled graphs for every batch size, True), or (the executor, False) when
        they are missing or refused and not required."""
        from livecam.engines import compile_progress
        from livecam.engines.engine_cache import EngineCache
        from livecam.engines.torch_compiled import (
            build_compiled,
            load_compiled,
            missing_build_error,
        )

        options = self.compile
        assert options is not None
        cache = EngineCache(options.cache_dir)
        cache.tidy()  # what builds killed mid-write left
        keys = {b: options.key(self._device, self.precision, self._use_channels_last, b)
                for b in options.batch_sizes}
        paths = {b: cache.load_path(options.model_name, k) for b, k in keys.items()}
        missing = [b for b, p in paths.items() if p is None]
        if missing and not options.build_if_missing:
            if options.required:
                raise missing_build_error(options, keys[missing[0]], missing)
            log.info("%s: no compiled build for batch %s on %s; running the ONNX executor "
                     "(`livecam engines build %s` compiles it, minutes)", options.model_name,
                     ", ".join(map(str, missing)), keys[missing[0]].device, options.model_name)
            return self._executor(model), False
        executor = self._executor(model)

        def say(text: str) -> None:
            log.info("  %s: %s", options.model_name, text)

        for i, b in enumerate(missing):
            log.info("compiling %s for batch %d (%d of %d; minutes on a GPU)",
                     options.model_name, b, i + 1, len(missing))
            compile_progress.started("generator", (b,))
            t0 = time.perf_counter()
            paths[b] = build_compiled(executor, self._inputs, cache=cache,
                                      model_name=options.model_name, key=keys[b],
                                      device=self._device, progress=say)
            compile_progress.finished("generator", (b,), "compiled", time.perf_counter() - t0)
        ready = {b: p for b, p in paths.items() if p is not None}
        try:
            return load_compiled(ready, executor, self._inputs, cache=cache, keys=keys,
                                 device=self._device, model_name=options.model_name,
                                 progress=say), True
        except ModelError as exc:
            if options.required:
                raise
            log.warning("%s: %s; running the ONNX executor instead", options.model_name, exc)
            return executor, False

    @property
    def _use_channels_last(self) -> bool:
        if self.channels_last is not None:
            return self.channels_last
        return self._device is not None and self._device.type == "cuda"

    def close(self) -> None:
        self._graphs.clear()
        self._module = None
        self.compiled = False

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Host arrays in, float32 host arrays out; see :class:`Engine`."""
        import torch

        check_feeds(self._inputs, feeds)
        tensors = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
                   for k, v in feeds.items()}
        if self._device.type == "cuda":
            tensors = {k: v.pin_memory().to(self._device, non_blocking=True)
                       for k, v in tensors.items()}
        outs = self.run_torch(tensors)
        return {k: v.float().cpu().numpy() for k, v in outs.items()}

    def run_torch(self, feeds: Mapping[str, Any], stream: Any = None) -> dict[str, Any]:
        """Run on device tensors, on ``stream`` (a ``torch.cuda.Stream``; None = current).

        ``feeds`` maps input names to tensors on :attr:`device` (any float dtype; cast here).
        Returns output tensors in the compute dtype (float16 for fp16), on the same device.
        With CUDA graphs the outputs are the graph's static buffers (see the class docstring).
        Work is queued on ``stream`` and not waited for: synchronise on it before reading.
        """
        import torch

        if self._module is None:
            raise RuntimeError("engine is not open: call open() first")
        ordered = [feeds[s.name] for s in self._inputs]
        with torch.inference_mode():
            if self._device.type != "cuda":
                return self._named(self._module(*self._prepare(ordered)))
            with torch.cuda.stream(stream) if stream is not None else _nullcontext():
                if not self.cuda_graphs:
                    return self._named(self._module(*self._prepare(ordered)))
                captured = self._capture(ordered)
                for dst, src in zip(captured.static_inputs, ordered, strict=True):
                    dst.copy_(src)
                captured.graph.replay()
                return self._named(captured.static_outputs)

    def warmup(self, batch_sizes: tuple[int, ...] = (1,)) -> None:
        """Capture (or just run) each batch size once now, so the first frame is not slow."""
        import torch

        for n in batch_sizes:
            feeds = {s.name: torch.zeros((n, *[d if isinstance(d, int) else 1
                                                for d in s.shape[1:]]), device=self._device)
                     for s in self._inputs}
            self.run_torch(feeds)
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def _prepare(self, tensors: list[Any]) -> list[Any]:
        import torch

        out = []
        for t in tensors:
            t = t.to(self._device, self.float_dtype) if t.dtype.is_floating_point else t
            if self._use_channels_last and t.dim() == 4:
                t = t.contiguous(memory_format=torch.channels_last)
            out.append(t)
        return out

    def _named(self, values: tuple[Any, ...]) -> dict[str, Any]:
        return {s.name: v for s, v in zip(self._outputs, values, strict=True)}

    def _capture(self, tensors: list[Any]) -> _Captured:
        import torch

        key = tuple(tuple(t.shape) for t in tensors)
        captured = self._graphs.get(key)
        if captured is not None:
            return captured
        static_inputs = self._prepare([t.clone() for t in tensors])
        side = new_stream(self._device)  # of its own: see livecam.engines.cuda_streams
        side.wait_stream(torch.cuda.current_stream(self._device))
        with torch.cuda.stream(side):
            for _ in range(2):  # let cuDNN pick its algorithms before capture
                with self._module.recording_host_values() as host_values:
                    self._module(*static_inputs)
        torch.cuda.current_stream(self._device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other streams of the process keep running their GPU work meanwhile
        with self._module.replaying_host_values(host_values), \
                torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            static_outputs = self._module(*static_inputs)
        captured = _Captured(graph, static_inputs, tuple(static_outputs))
        self._graphs[key] = captured
        log.debug("captured a CUDA graph for %s shapes %s", self.model_path.name, key)
        return captured


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

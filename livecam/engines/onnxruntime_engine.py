"""The onnxruntime backend: CPU everywhere; CUDA / TensorRT execution providers where installed."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from livecam.core.errors import DependencyError, ModelError
from livecam.engines.protocol import EngineBase, TensorSpec, check_feeds

log = logging.getLogger(__name__)

_GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")


# what each declared input dtype is fed as (CodeFormer's fidelity input is a double)
_HOST_DTYPES: dict[str, type] = {"float16": np.float16, "tensor(double)": np.float64}


def _spec(arg: Any) -> TensorSpec:
    dims = tuple(d if isinstance(d, int) else str(d) for d in arg.shape)
    dtype = {"tensor(float)": "float32", "tensor(float16)": "float16"}.get(arg.type, arg.type)
    return TensorSpec(arg.name, dims, dtype)


class OnnxRuntimeEngine(EngineBase):
    """Runs an ONNX file with onnxruntime.

    ``device``: ``"cpu"`` uses the CPU provider only; ``"auto"``/``"cuda"`` put the TensorRT and
    CUDA execution providers first when this onnxruntime build has them (``"cuda"`` fails if it
    has neither). ``threads`` = 0 lets onnxruntime choose. Models with a static batch of 1 run
    larger batches row by row. Inputs of a float16 model are cast from float32 here.
    """

    backend = "onnxruntime"

    def __init__(self, model_path: str | Path, *, device: str = "auto", threads: int = 0) -> None:
        self.model_path = Path(model_path)
        self.device = device
        self.threads = threads
        self._session: Any = None
        self.providers: tuple[str, ...] = ()

    @property
    def max_batch(self) -> int | None:
        """Rows one session call holds (1 for static-batch models), None = any."""
        batches = [s.static_batch for s in self._inputs]
        return 1 if 1 in batches else None

    def open(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise DependencyError("onnxruntime is not installed: pip install onnxruntime "
                                  "(or onnxruntime-gpu for CUDA)") from exc
        available = ort.get_available_providers()
        providers = ["CPUExecutionProvider"]
        if self.device != "cpu":
            gpu = [p for p in _GPU_PROVIDERS if p in available]
            if self.device.startswith("cuda") and not gpu:
                raise DependencyError(
                    "advanced.engine.device is cuda but this onnxruntime has no CUDA provider: "
                    "pip install onnxruntime-gpu, or use engine.backend: torch")
            providers = gpu + providers
        options = ort.SessionOptions()
        options.log_severity_level = 3  # the unused `emap` initializer is expected, not news
        if self.threads:
            options.intra_op_num_threads = self.threads
        try:
            self._session = ort.InferenceSession(str(self.model_path), options,
                                                 providers=providers)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ModelError(f"onnxruntime cannot load {self.model_path}: {exc}") from exc
        self.providers = tuple(self._session.get_providers())
        self._inputs = tuple(_spec(a) for a in self._session.get_inputs())
        self._outputs = tuple(_spec(a) for a in self._session.get_outputs())
        log.debug("onnxruntime opened %s with %s", self.model_path.name, self.providers)

    def close(self) -> None:
        self._session = None

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on host arrays; see :class:`livecam.engines.protocol.Engine`."""
        if self._session is None:
            raise RuntimeError("engine is not open: call open() first")
        batch = check_feeds(self._inputs, feeds)
        cast = {s.name: _HOST_DTYPES.get(s.dtype, np.float32) for s in self._inputs}
        typed: dict[str, np.ndarray] = {k: np.ascontiguousarray(v, dtype=cast[k])
                                        for k, v in feeds.items()}
        names = [s.name for s in self._outputs]
        if self.max_batch == 1 and batch > 1:
            rows = [self._session.run(names, {k: v[i:i + 1] for k, v in typed.items()})
                    for i in range(batch)]
            return {n: np.concatenate([r[j] for r in rows]).astype(np.float32)
                    for j, n in enumerate(names)}
        outs = self._session.run(names, typed)
        return {n: np.asarray(o, dtype=np.float32) for n, o in zip(names, outs, strict=True)}

"""The model that Triton's Python backend runs for every livecam model it serves.

A repository written by :mod:`livecam.engines.triton_repo` holds, per model, ``1/model.py`` (two
lines importing :class:`TritonPythonModel` from here), ``1/model.onnx`` (the verified file) and
``1/manifest.yaml``. Triton starts one stub process per instance; each builds the fastest engine
livecam has on that machine (``engine.backend`` of the serving config: TensorRT, torch with CUDA
graphs, or onnxruntime on the CPU) for its device and runs batches formed by Triton's dynamic
batcher. Requests carry float16 tensors (batch first); responses too.

``execute`` concatenates every request of one call along the batch axis, pads the batch to the
next size in ``batch_sizes`` (so the torch backend captures a CUDA graph per bucket, all of them
warmed up in ``initialize``, instead of one per size met), runs it and splits the rows back.
Only Triton's stub imports this module; ``triton_python_backend_utils`` exists only there.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def batch_buckets(max_batch: int) -> tuple[int, ...]:
    """Batch sizes a served model runs at: powers of two below ``max_batch``, then it."""
    sizes, size = [], 1
    while size < max_batch:
        sizes.append(size)
        size *= 2
    return (*sizes, max_batch)


def bucket_for(rows: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket holding ``rows`` rows (``rows`` <= the last bucket)."""
    return next(b for b in buckets if b >= rows)


def _parameters(model_config: dict[str, Any]) -> dict[str, str]:
    return {k: v.get("string_value", "") for k, v in model_config.get("parameters", {}).items()}


class ServedEngine:
    """One instance's engine: ``run(feeds)`` with float16 (B, ...) arrays -> float16 arrays.

    ``device`` is ``"cpu"`` or ``"cuda:<id>"``. Separate from the Triton glue so tests run it
    in-process.
    """

    def __init__(self, version_dir: Path, *, backend: str, device: str, precision: str,
                 max_batch: int, torch_mode: str = "auto", cache_dir: str = "") -> None:
        self.version_dir = version_dir
        self.backend, self.device, self.precision = backend, device, precision
        self.buckets = batch_buckets(max_batch)
        self.torch_mode, self.cache_dir = torch_mode, cache_dir
        self._engine: Any = None
        self._torch_device: Any = None

    def open(self) -> None:
        from livecam.config.engine import EngineConfig
        from livecam.engines.manifest import load_manifest
        from livecam.engines.registry import choose_backend, create_engine

        manifest = load_manifest(self.version_dir / "manifest.yaml")
        sha256 = (self.version_dir / "model.sha256").read_text().strip()
        device = "cpu" if self.device == "cpu" else "cuda"
        if device == "cuda":
            import torch

            torch.cuda.set_device(int(self.device.split(":")[1]))
            self._torch_device = torch.device(self.device)
        config = EngineConfig(backend=self.backend, device=device, precision=self.precision,
                              torch_mode=self.torch_mode, cache_dir=self.cache_dir,
                              max_batch=self.buckets[-1])
        choice = choose_backend(self.backend, device)
        # the bucket sizes: a generator compiled for them (`livecam engines build`) is used
        self._engine = create_engine(manifest, self.version_dir / "model.onnx", sha256, config,
                                     choice, batch_sizes=self.buckets)
        self._engine.open()
        log.info("serving %s on %s with %s (%s)", manifest.name, self.device, choice.name,
                 choice.reason)

    def warm_up(self) -> None:
        """Run every batch bucket once (captures CUDA graphs / builds kernels before traffic)."""
        for rows in self.buckets:
            feeds = {s.name: np.zeros((rows, *[int(d) for d in s.shape[1:]]), np.float16)
                     for s in self._engine.inputs}
            self.run(feeds)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = len(next(iter(feeds.values())))
        size = bucket_for(rows, self.buckets)
        if size != rows:
            feeds = {k: np.concatenate([v, np.zeros((size - rows, *v.shape[1:]), v.dtype)])
                     for k, v in feeds.items()}
        if self._torch_device is not None and hasattr(self._engine, "run_torch"):
            outs = self._run_cuda(feeds)
        else:
            outs = self._engine.run({k: v.astype(np.float32) for k, v in feeds.items()})
        return {k: np.ascontiguousarray(v[:rows], dtype=np.float16) for k, v in outs.items()}

    def _run_cuda(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        tensors = {k: torch.from_numpy(v).to(self._torch_device, non_blocking=True)
                   for k, v in feeds.items()}
        outs = self._engine.run_torch(tensors)
        torch.cuda.current_stream().synchronize()
        return {k: v.half().cpu().numpy() for k, v in outs.items()}

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


#: The stub's pybind11 reads numpy's array descriptor with the numpy 1.x layout: under numpy 2
#: its arrays come out with item size 0 (``as_numpy`` inputs with zero strides, outputs of 0
#: bytes: every answer empty, as first seen on the H200), so there tensors cross through DLPack,
#: which carries shape, strides and dtype itself. Under numpy 1.x DLPack is the broken side
#: (numpy's capsule deleter fails on the capsule the stub renamed, and the stub dies), so
#: there the plain numpy bridge stays.
_DLPACK = int(np.__version__.split(".")[0]) >= 2


def _to_numpy(tensor: Any) -> np.ndarray:
    """A request's (CPU) tensor as a numpy array of its own (see ``_DLPACK``)."""
    if _DLPACK:
        return np.array(np.from_dlpack(tensor), copy=True)
    return np.asarray(tensor.as_numpy())


def _to_tensor(pb_utils: Any, name: str, array: np.ndarray) -> Any:
    """A response tensor holding ``array`` (see ``_DLPACK``)."""
    array = np.ascontiguousarray(array)
    return pb_utils.Tensor.from_dlpack(name, array) if _DLPACK else pb_utils.Tensor(name, array)


class TritonPythonModel:
    """Triton's Python-backend interface (``initialize``/``execute``/``finalize``).

    Triton calls these from the stub's main thread, one call at a time per instance.
    """

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = _parameters(config)
        kind = args.get("model_instance_kind", "CPU")
        device = f"cuda:{args['model_instance_device_id']}" if kind == "GPU" else "cpu"
        version_dir = Path(args["model_repository"]) / args["model_version"]
        self._inputs = [i["name"] for i in config["input"]]
        self._outputs = [o["name"] for o in config["output"]]
        self._engine = ServedEngine(version_dir, backend=params["livecam_backend"],
                                    device=device, precision=params["livecam_precision"],
                                    max_batch=int(config["max_batch_size"]),
                                    torch_mode=params.get("livecam_torch_mode", "auto"),
                                    cache_dir=params.get("livecam_cache_dir", ""))
        self._engine.open()
        if params.get("livecam_warm_up") == "true":
            self._engine.warm_up()

    def execute(self, requests: list[Any]) -> list[Any]:
        import triton_python_backend_utils as pb_utils

        arrays = [{n: _to_numpy(pb_utils.get_input_tensor_by_name(r, n)) for n in self._inputs}
                  for r in requests]
        rows = [len(a[self._inputs[0]]) for a in arrays]
        responses = []
        try:
            outs: dict[str, list[np.ndarray]] = {n: [] for n in self._outputs}
            start = 0
            joined = {n: np.concatenate([a[n] for a in arrays]) for n in self._inputs}
            while start < sum(rows):
                chunk = {n: v[start:start + self._engine.buckets[-1]] for n, v in joined.items()}
                for n, v in self._engine.run(chunk).items():
                    outs[n].append(v)
                start += self._engine.buckets[-1]
            full = {n: np.concatenate(v) for n, v in outs.items()}
            offset = 0
            for count in rows:
                tensors = [_to_tensor(pb_utils, n, full[n][offset:offset + count])
                           for n in self._outputs]
                responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
                offset += count
        except Exception as exc:  # every request gets an answer, the error one included
            error = pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
            responses = [pb_utils.InferenceResponse(output_tensors=[], error=error)
                         for _ in requests]
        return responses

    def finalize(self) -> None:
        self._engine.close()

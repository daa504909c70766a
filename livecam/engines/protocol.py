"""The engine seam: one small protocol every backend implements.

An engine runs one ONNX model. It is constructed cheaply (paths and options), loads or builds
in ``open()``, frees in an idempotent ``close()``, and is a context manager. ``run`` takes and
returns host numpy arrays; GPU backends also offer ``run_torch`` on caller-owned CUDA tensors
and stream (see :class:`TorchEngine` and :class:`TensorRTEngine`), which the GPU pipeline uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from livecam.core.lifecycle import Lifecycle

BACKENDS = ("tensorrt", "torch", "onnxruntime")
PRECISIONS = ("fp32", "fp16")


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output: ``shape`` holds ints, or names for dynamic dimensions."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str = "float32"

    @property
    def static_batch(self) -> int | None:
        """The declared batch size, or None when the batch dimension is dynamic."""
        if not self.shape:
            return None
        first = self.shape[0]
        return first if isinstance(first, int) and first > 0 else None


@runtime_checkable
class Engine(Protocol):
    """A loaded model. Only one thread calls ``run`` at a time (the pipeline thread).

    ``run(feeds)`` takes one array per input name (float32, batch first: N >= 1 rows) and
    returns one float32 array per output name, batch first. A backend whose model declares a
    static batch of 1 runs larger batches row by row; ``max_batch`` says what one call holds.
    """

    backend: str

    @property
    def inputs(self) -> tuple[TensorSpec, ...]: ...

    @property
    def outputs(self) -> tuple[TensorSpec, ...]: ...

    def open(self) -> None: ...

    def close(self) -> None: ...

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@runtime_checkable
class RequestEngine(Protocol):
    """An engine that takes several requests at once (a remote server: the triton backend).

    ``submit(feeds)`` (as ``run``'s) sends a request and returns at once; ``result(future,
    sent_ns=, wait_s=)`` gives its outputs (as ``run``'s), None while it is not answered
    within ``wait_s`` and still within its deadline (counted from ``sent_ns``,
    ``time.perf_counter_ns``), and raises :class:`~livecam.core.errors.EngineUnavailableError`
    when it failed or is past its deadline. Both may be called from any thread.
    """

    def submit(self, feeds: Mapping[str, np.ndarray]) -> Future[dict[str, np.ndarray]]: ...

    def result(self, future: Future[dict[str, np.ndarray]], *, sent_ns: int,
               wait_s: float) -> dict[str, np.ndarray] | None: ...


class EngineBase(Lifecycle):
    """Context-manager support for engines (each backend overrides ``open``/``close``) and the
    ``inputs``/``outputs`` specs, which a backend fills in ``open``."""

    backend = "base"
    _inputs: tuple[TensorSpec, ...] = ()
    _outputs: tuple[TensorSpec, ...] = ()

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs


def check_feeds(specs: tuple[TensorSpec, ...], feeds: Mapping[str, np.ndarray]) -> int:
    """Validate ``feeds`` against ``specs``; return the batch size. Raises Type/ValueError."""
    names = {s.name for s in specs}
    if set(feeds) != names:
        raise ValueError(f"expected inputs {sorted(names)}, got {sorted(feeds)}")
    batch = None
    for spec in specs:
        arr = feeds[spec.name]
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"input {spec.name} must be a numpy array, got {type(arr).__name__}")
        if arr.ndim != len(spec.shape):
            raise ValueError(f"input {spec.name} must have {len(spec.shape)} dims "
                             f"{spec.shape}, got {arr.shape}")
        for want, got in zip(spec.shape[1:], arr.shape[1:], strict=True):
            if isinstance(want, int) and want > 0 and want != got:
                raise ValueError(f"input {spec.name} must be {spec.shape}, got {arr.shape}")
        if batch is None:
            batch = arr.shape[0]
        elif arr.shape[0] != batch:
            raise ValueError(f"inputs disagree on the batch size: {batch} vs {arr.shape[0]}")
    return int(batch or 0)

"""An engine made on first use (:class:`LazyEngine`), for the swap's models and the face
enhancer on the CPU path, and (:class:`LazyTorchEngine`) the GPU pipeline's generator and
enhancer: wiring stays cheap and a missing model fails when the stage opens."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

import numpy as np

from livecam.engines.protocol import Engine, RequestEngine, TensorSpec
from livecam.engines.torch_engine import TorchEngine  # torch itself is imported in open

__all__ = ["LazyEngine", "LazyTorchEngine"]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Engine)


class LazyEngine(Generic[E]):
    """An engine made by ``make`` (which verifies its model) on first use, so construction
    stays cheap and a missing model fails when the stage opens, not when the app is wired.
    ``backend`` names it in errors; with ``label``, ``open`` logs the label and the engine's
    ``mode`` (what runs). ``close`` closes it only when it was made; it is made at most once.
    Not thread-safe: the thread that opens it runs it."""

    def __init__(self, backend: str, make: Callable[[], E], *, label: str | None = None
                 ) -> None:
        self.backend = backend
        self._make = make
        self._label = label
        self._engine: E | None = None

    @property
    def engine(self) -> E:
        """The engine (made on first use)."""
        if self._engine is None:
            self._engine = self._make()
        return self._engine

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.engine.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.engine.outputs

    def open(self) -> None:
        self.engine.open()
        if self._label is not None:
            log.info("%s: %s", self._label, getattr(self.engine, "mode", self.backend))

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.engine.run(feeds)

    def submit(self, feeds: Mapping[str, np.ndarray]) -> Future[dict[str, np.ndarray]]:
        """A remote engine's request (:class:`RequestEngine`); TypeError for a local one."""
        return self._requests().submit(feeds)

    def result(self, future: Future[dict[str, np.ndarray]], *, sent_ns: int,
               wait_s: float) -> dict[str, np.ndarray] | None:
        return self._requests().result(future, sent_ns=sent_ns, wait_s=wait_s)

    def _requests(self) -> RequestEngine:
        engine = self.engine
        if not isinstance(engine, RequestEngine):
            raise TypeError(f"the {self.backend} engine runs one request at a time (no submit)")
        return engine

    def health(self) -> dict[str, Any] | None:
        """A remote engine's link state (``TritonEngine.health``), else None. Any thread."""
        health = getattr(self._engine, "health", None)
        return health() if callable(health) else None


class LazyTorchEngine(LazyEngine[TorchEngine]):
    """A torch engine made on first use, standing in for it where the GPU pipeline runs it
    (``device``, ``cuda_graphs``, ``run_torch`` too). The hub makes it in ``open``, after its
    ``require_models`` check, so a missing model is reported as such; making it verifies the
    file's sha256, which keys the compiled packages. Only the thread that launches ticks runs
    it."""

    @property
    def device(self) -> Any:
        return self.engine.device

    @property
    def cuda_graphs(self) -> bool:
        return self.engine.cuda_graphs

    def run_torch(self, feeds: Mapping[str, Any], stream: Any = None) -> dict[str, Any]:
        return self.engine.run_torch(feeds, stream)

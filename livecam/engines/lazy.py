"""An engine made on first use (:class:`LazyEngine`), for the swap's models and the face
enhancer: wiring stays cheap and a missing model fails when the stage opens."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np

from livecam.engines.protocol import Engine, RequestEngine, TensorSpec

__all__ = ["LazyEngine"]


class LazyEngine:
    """An engine made (and its model verified) on first use, so construction stays cheap and
    a missing model fails when the stage opens, not when the app is wired."""

    def __init__(self, backend: str, make: Callable[[], Engine]) -> None:
        self.backend = backend
        self._make = make
        self._engine: Engine | None = None

    def _get(self) -> Engine:
        if self._engine is None:
            self._engine = self._make()
        return self._engine

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._get().inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._get().outputs

    def open(self) -> None:
        self._get().open()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._get().run(feeds)

    def submit(self, feeds: Mapping[str, np.ndarray]) -> Future[dict[str, np.ndarray]]:
        """A remote engine's request (:class:`RequestEngine`); TypeError for a local one."""
        return self._requests().submit(feeds)

    def result(self, future: Future[dict[str, np.ndarray]], *, sent_ns: int,
               wait_s: float) -> dict[str, np.ndarray] | None:
        return self._requests().result(future, sent_ns=sent_ns, wait_s=wait_s)

    def _requests(self) -> RequestEngine:
        engine = self._get()
        if not isinstance(engine, RequestEngine):
            raise TypeError(f"the {self.backend} engine runs one request at a time (no submit)")
        return engine

    def health(self) -> dict[str, Any] | None:
        """A remote engine's link state (``TritonEngine.health``), else None. Any thread."""
        health = getattr(self._engine, "health", None)
        return health() if callable(health) else None

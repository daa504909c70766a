"""The generator's source latents of the identities, for every stream of a process."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from livecam.core.errors import IdentityError
from livecam.swap.neural import EmbeddingFn

log = logging.getLogger(__name__)


class SourceLatents:
    """Identity name -> the generator's (D,) latent, made from ``source_embedding(name)`` (its
    (512,) ArcFace embedding, None or :class:`IdentityError` when it cannot be had) and the
    model's (D, D) embedding map (:meth:`open`); cached in memory. One that cannot be had is
    logged and retried at most once per ``retry_s``. Any thread may call it."""

    def __init__(self, source_embedding: EmbeddingFn, *, retry_s: float,
                 clock: Callable[[], float]) -> None:
        self.source_embedding = source_embedding
        self.retry_s = retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._emap: np.ndarray | None = None
        self._latents: dict[str, np.ndarray] = {}
        self._failed: dict[str, float] = {}

    def open(self, emap: np.ndarray) -> None:
        with self._lock:
            self._emap = emap

    def clear(self) -> None:
        with self._lock:
            self._latents.clear()
            self._failed.clear()

    def get(self, name: str) -> np.ndarray | None:
        """``name``'s latent, or None when it cannot be had (see the class docstring)."""
        with self._lock:
            cached = self._latents.get(name)
            if cached is not None:
                return cached
            failed = self._failed.get(name)
            if failed is not None and self._clock() - failed < self.retry_s:
                return None
            from livecam.swap.inswapper import latents_from_embeddings

            try:
                embedding = self.source_embedding(name)
                why = "it has no usable photo"
            except IdentityError as exc:
                embedding, why = None, str(exc)
            if embedding is None:
                self._failed[name] = self._clock()
                log.warning("identity %r is unavailable: %s", name, why)
                return None
            self._failed.pop(name, None)
            assert self._emap is not None, "a latent asked for before open()"
            latent = latents_from_embeddings(np.asarray(embedding)[None], self._emap)[0]
            self._latents[name] = latent.astype(np.float32)
            return self._latents[name]

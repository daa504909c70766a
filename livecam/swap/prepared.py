"""What a swap stage needs of each identity, prepared on a worker thread so frames never wait.

Before a stage can swap a face into an identity it needs something made from the identity's
photos: the classic stage their warps, the neural stages their ArcFace embedding (the GPU hub
the generator's latent from it). Making it takes milliseconds when cached and a second or more
on a first start (the photos read, the recognizer opened and run). :class:`PreparedIdentities`
makes it on one worker thread, ahead of use for the identities a user can switch to
(:meth:`ahead`), and answers a frame without waiting (:meth:`get`):

- prepared: the value, kept until :meth:`close`;
- being prepared: ``Unswappable.IDENTITY_LOADING`` (the stage covers that face);
- failed (:class:`~livecam.core.errors.IdentityError`): ``Unswappable.IDENTITY_MISSING``, and
  :meth:`why`; tried again on the worker after ``retry_s``.

Only an identity's first use, when nothing started preparing it yet, waits for it, and so
does every caller that asks for it meanwhile (the streams of one process starting together):
the first frames of ``livecam run`` on a file are swapped, not covered. A preparation started
ahead of use, or a retry, is never waited for. Any other exception of
``prepare`` (a remote recognizer that does not answer) is raised to the caller of :meth:`get`,
and the identity is prepared afresh at its next use. Any thread may call every method.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from livecam.core.errors import IdentityError
from livecam.core.types import Unswappable

T = TypeVar("T")

#: Identities prepared ahead of use (the hotkeys reach 9; the panel shows all).
AHEAD_MAX = 16


class PreparedIdentities(Generic[T]):
    """``prepare(name)`` for each identity asked for, once, on one worker thread (see the
    module). ``retry_s``: how long a failed identity is answered as missing before it is
    prepared again; ``clock`` returns seconds (injectable for tests)."""

    def __init__(self, prepare: Callable[[str], T], *, retry_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 thread_name: str = "livecam-identity") -> None:
        self._prepare = prepare
        self.retry_s = retry_s
        self._clock = clock
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._ready: dict[str, T] = {}
        self._failed: dict[str, tuple[float, str]] = {}  # name -> (when, why)
        self._pending: dict[str, Future[T]] = {}
        self._demanded: set[str] = set()  # under way because a first use waits for them
        self._worker: ThreadPoolExecutor | None = None
        self._generation = 0  # close() starts a new one: older results are dropped

    def get(self, name: str) -> T | Unswappable:
        """``name``'s prepared value, or why there is none this frame (see the module)."""
        value = self._ready.get(name)  # a dict read: no lock, no wait for another identity
        if value is not None:
            return value
        with self._lock:
            value = self._ready.get(name)  # prepared since the read above
            if value is not None:
                return value
            future = self._pending.get(name)
            if future is None and name not in self._failed:  # a first use: it waits
                future = self._start(name, demanded=True)
            elif future is None and self._retry_due(name):
                future = self._start(name)
            wait = name in self._demanded
        if future is None:
            return Unswappable.IDENTITY_MISSING
        if not wait and not future.done():
            return Unswappable.IDENTITY_LOADING
        try:
            future.result()  # a first use waits (and so does every caller while it does)
        except IdentityError:
            pass
        except BaseException:
            with self._lock:
                if self._pending.get(name) is future:
                    del self._pending[name]
                    self._demanded.discard(name)
            raise
        value = self._ready.get(name)
        return value if value is not None else Unswappable.IDENTITY_MISSING

    def why(self, name: str) -> str:
        """Why ``name`` could not be prepared the last time ('' if it was not tried)."""
        failed = self._failed.get(name)
        return failed[1] if failed is not None else ""

    def ahead(self, names: Iterable[str]) -> None:
        """Start preparing the first :data:`AHEAD_MAX` of ``names`` that are neither prepared,
        under way nor failed (a dict read each when all are: cheap to call every frame)."""
        wanted = [n for _, n in zip(range(AHEAD_MAX), names, strict=False)
                  if n not in self._ready and n not in self._pending and n not in self._failed]
        if not wanted:
            return
        with self._lock:
            for name in wanted:
                if name not in self._ready and name not in self._pending \
                        and name not in self._failed:
                    self._start(name)

    def wait(self, name: str, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for ``name``'s preparation under way, if any; True when
        none is under way any more (prepared, failed, or never started)."""
        future = self._pending.get(name)
        if future is None:
            return True
        try:
            future.result(timeout_s)
        except TimeoutError:
            return False
        except BaseException:  # get() reports it
            pass
        return True

    def close(self) -> None:
        """Forget every identity; a preparation under way finishes on its own (unread)."""
        with self._lock:
            worker, self._worker = self._worker, None
            self._generation += 1
            self._pending.clear()
            self._demanded.clear()
            self._ready.clear()
            self._failed.clear()
        if worker is not None:
            worker.shutdown(wait=False, cancel_futures=True)

    def _retry_due(self, name: str) -> bool:
        failed = self._failed.get(name)
        return failed is not None and self._clock() - failed[0] >= self.retry_s

    def _start(self, name: str, demanded: bool = False) -> Future[T]:
        """Queue ``name`` on the worker (``_lock`` held); ``demanded``: a first use waits."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix=self._thread_name)
        future = self._worker.submit(self._run, name, self._generation)
        self._pending[name] = future
        if demanded:
            self._demanded.add(name)
        return future

    def _run(self, name: str, generation: int) -> T:
        try:
            value = self._prepare(name)
        except IdentityError as exc:
            with self._lock:
                if generation == self._generation:
                    self._failed[name] = (self._clock(), str(exc))
                    self._pending.pop(name, None)
                    self._demanded.discard(name)
            raise
        with self._lock:
            if generation == self._generation:
                self._ready[name] = value
                self._failed.pop(name, None)
                self._pending.pop(name, None)
                self._demanded.discard(name)
        return value

"""Who hears about each compile of the GPU pipeline as it happens: the seam ``livecam engines
build`` reports its progress through.

Every compiled call of the GPU pipeline (the face networks and the swap's parts, through
:class:`~livecam.gpupipe.networks.compiled.CompiledNetwork`; the generator's batches, through the
torch engine) calls :func:`started` before its first call with a new input shape compiles (or
loads its code) and :func:`finished` after it. Each names the shape as the start's plan does
(:class:`livecam.gpupipe.shapes.CompiledShape`: ``part`` and ``inputs``), so a listener can
count them against the plan. With no listener, nothing happens.

One listener at a time (the build's); compiles run on whichever thread opens a stage, so the
listener may be called from any thread (one compile at a time: they take turns). Beside it, a
start keeps one recorder for the whole process (:func:`keep_recording`): what it compiled goes
into the engine cache's record, so the next start does not announce it again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, Protocol


class CompileListener(Protocol):
    """Told about each compiled shape. Called from the compiling thread, one compile at a
    time; must not raise."""

    def started(self, part: str, inputs: tuple[object, ...]) -> None:
        """``part`` (e.g. ``swap paste-back``) starts compiling or loading for ``inputs``."""

    def finished(self, part: str, inputs: tuple[object, ...], how: str,
                 took_s: float) -> None:
        """... and is done: ``how`` is ``compiled``, ``loaded`` (saved code read whole),
        ``cached`` (Inductor's cache) or ``failed`` (it runs uncompiled)."""


class _Listening:
    """The one listener of the process and its recorders (see the module docstring), behind
    a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listener: CompileListener | None = None
        self.recorders: dict[object, CompileListener] = {}


_LISTENING = _Listening()


@contextlib.contextmanager
def listening(listener: CompileListener) -> Iterator[CompileListener]:
    """``listener`` hears every compile inside the block (the previous one after it)."""
    with _LISTENING.lock:
        before, _LISTENING.listener = _LISTENING.listener, listener
    try:
        yield listener
    finally:
        with _LISTENING.lock:
            _LISTENING.listener = before


def keep_recording(key: object, recorder: CompileListener) -> None:
    """``recorder`` hears every later compile of the process, beside the listener; one per
    ``key`` (the first stays: each start of a process with the same cache asks again)."""
    with _LISTENING.lock:
        _LISTENING.recorders.setdefault(key, recorder)


def _hearers() -> list[CompileListener]:
    with _LISTENING.lock:
        listener = _LISTENING.listener
        return [*_LISTENING.recorders.values(), *([listener] if listener is not None else [])]


def started(part: str, inputs: tuple[object, ...]) -> None:
    """Tell the listener and the recorders, if any, that ``part`` starts compiling for
    ``inputs``."""
    for hearer in _hearers():
        hearer.started(part, inputs)


def finished(part: str, inputs: tuple[object, ...], how: str, took_s: float) -> None:
    """Tell the listener and the recorders, if any, that ``part`` for ``inputs`` is done (see
    :meth:`CompileListener.finished`)."""
    for hearer in _hearers():
        hearer.finished(part, inputs, how, took_s)


def call_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[object, ...]:
    """A compiled call's inputs as the shape plan names them: the first tensor's shape (the
    frames), the second tensor's first dimension (the frames, regions or faces of the call,
    or the first tensor's own first dimension when there is no second), and the last integer
    argument when there is one (the paste window, px)."""
    tensors = [a for a in (*args, *(v for _, v in sorted(kwargs.items())))
               if hasattr(a, "shape")]
    if not tensors:
        return ()
    first = tuple(int(d) for d in tensors[0].shape)
    count = int(tensors[1].shape[0]) if len(tensors) > 1 else (first[0] if first else 1)
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    return (first, count, *ints[-1:])

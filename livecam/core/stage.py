"""The stage protocols: a small object with one verb, ``process`` (or ``submit``/``collect``).

A stage is constructed cheaply (config and dependencies only), does heavy work in ``open()``
(loading models, allocating buffers) and frees it in an idempotent ``close()``. It is a context
manager. Only the pipeline thread calls ``process``; it must not modify its input packet (return
a new one with ``packet.with_fields(...)``).

An :class:`AsyncStage` finishes its work after ``submit`` returns (the GPU pipeline keeps
several frames in flight in a ring of slots); the runtime collects the results in order on a
thread of its own. A stage that can do slow set-up for a frame size before the first frame
(capturing CUDA graphs) offers :class:`Prepares`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from livecam.core.lifecycle import Lifecycle
from livecam.core.types import ImageBGR, Packet


@runtime_checkable
class Stage(Protocol):
    """One step of the per-frame work. ``name`` labels its timings in metrics and logs."""

    name: str

    def open(self) -> None: ...

    def close(self) -> None: ...

    def process(self, packet: Packet) -> Packet: ...


@runtime_checkable
class AsyncStage(Protocol):
    """A last step whose work finishes later, with up to ``capacity`` packets in flight.

    Contract (the runtime's scheduler keeps it): ``submit`` is called by one thread (the
    pipeline thread, or the last stage worker) only while fewer than ``capacity`` packets are
    in flight; it may raise (then nothing was queued for that packet). ``collect`` is called by
    one other thread (the runtime's collector): it returns the result of the *oldest* packet
    submitted and not yet collected, waiting up to ``timeout_s`` (None when not ready), or
    raises the error that packet's work ended in (that packet then counts as collected). So
    every submitted packet comes back exactly once, in submit order. ``close`` is called after
    both threads have stopped.
    """

    name: str

    @property
    def capacity(self) -> int:
        """Most packets in flight at once (>= 1)."""
        ...

    def open(self) -> None: ...

    def close(self) -> None: ...

    def submit(self, packet: Packet) -> None: ...

    def collect(self, timeout_s: float) -> Packet | None: ...


@runtime_checkable
class Prepares(Protocol):
    """A stage with slow set-up per frame size (CUDA-graph capture). The runtime calls
    ``prepare`` once, after ``open`` and before the output starts, with the source's frame
    size, from the thread that starts the run; the stage logs its progress. A frame of another
    size later is prepared on the frame's path (and logged)."""

    def prepare(self, width_px: int, height_px: int) -> None: ...


@runtime_checkable
class ChecksFit(Protocol):
    """A stage that can tell, before any stage prepares anything, whether it can run at a
    frame size (the GPU swap's memory plan). The runtime calls ``check_fits`` on every such
    stage first, from the thread that starts the run; it raises a :class:`LivecamError` (one
    line saying what to change) when the stage cannot."""

    def check_fits(self, width_px: int, height_px: int) -> None: ...


@runtime_checkable
class HostFrames(Protocol):
    """A stage that uploads each frame from host memory of a kind of its own (page-locked, for
    a GPU). ``host_frames`` is the copy into it (a function of the frame alone, which any
    thread may call), or None while the stage has none. The runtime asks its stages once, at
    start, and the capture thread copies every frame it reads with it, so the stage's own
    thread uploads the frame as it is, without a copy of its own (see
    :mod:`livecam.gpupipe.networks.host`)."""

    @property
    def host_frames(self) -> Callable[[ImageBGR], ImageBGR] | None: ...


def host_frames_of(stages: Sequence[object]) -> Callable[[ImageBGR], ImageBGR] | None:
    """The first of ``stages``' :class:`HostFrames` copies, or None when none has one."""
    for stage in stages:
        if isinstance(stage, HostFrames) and stage.host_frames is not None:
            return stage.host_frames
    return None


def source_i420_wanted(stages: Sequence[object]) -> bool:
    """Whether one of ``stages`` takes the I420 planes a source decoded a frame from
    (``takes_source_i420 = True`` on the stage: the thin client's encoder sends them as they
    are). The runtime asks once, at start; only then does a source that decodes yuv420p
    copy each frame's planes out at read time (:attr:`~livecam.core.types.Frame.
    received_i420`), so a run that would not use them never pays for the copy."""
    return any(getattr(stage, "takes_source_i420", False) is True for stage in stages)


#: What a pipeline's stage list holds: synchronous stages, the last one maybe asynchronous.
AnyStage = Stage | AsyncStage


class StageBase(Lifecycle):
    """Convenience base: context-manager support and no-op ``open``/``close``."""

    name = "stage"

    def process(self, packet: Packet) -> Packet:
        raise NotImplementedError

"""CUDA-graph capture of the swap program, per (slot, face-count bucket, paste window).

A graph replays fixed device addresses, so each slot (its own buffers), each face count and
each paste window (their own shapes) gets its own graphs. Modes, tried in order, falling back
rather than failing (:attr:`GraphRunner.modes` says which ran and why):

1. ``graph``: one graph for the whole swap (alignment, crops, generator, colour, paste-back).
   Needs an engine whose forward is capturable inside someone else's graph
   (``cuda_graphs=False`` and no host reads). The graphs of one slot share one memory pool
   (``Slot.graph_pool``: a slot runs one tick at a time, and what a graph leaves live, such as
   the segmented mode's staged crops, is never reused by the next capture), so a slot holds
   its largest graph's working memory, not the sum over buckets and windows (with a pool per
   graph, 4 streams run out of 140 GB); slots keep pools of their own, so
   two ticks' generators may run at the same time.
2. ``segmented``: two graphs (alignment + crops; colour + paste-back) with the generator call
   between them, eager or replaying the engine's *own* CUDA graph
   (``TorchEngine(cuda_graphs=True)``; graphs cannot nest). That engine graph's buffers are
   shared by every slot, so generator calls are ordered across ticks (``generated`` events);
   its output is copied into a per-(slot, bucket) buffer the second graph reads.
3. ``eager``: no graph (CPU, ``use_graphs=False``, or capture failed).

Buckets: face counts round up to the next bucket (padding rows are invalid and only cost a
little compute), so a handful of graphs cover every count up to the slot's ``max_faces``.
Only the thread that launches ticks calls :meth:`GraphRunner.run` and :meth:`prepare`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from livecam.engines.cuda_streams import new_stream
from livecam.gpupipe.program import Staged, SwapProgram
from livecam.gpupipe.shapes import doubling
from livecam.gpupipe.slots import Slot

log = logging.getLogger(__name__)

MODES = ("graph", "segmented", "eager")


def face_buckets(max_faces: int) -> tuple[int, ...]:
    """0, 1, 2, 4, 8, ... up to and including ``max_faces``."""
    return doubling(max_faces, start=0)


def bucket_for(n_faces: int, buckets: tuple[int, ...]) -> int:
    for b in buckets:
        if b >= n_faces:
            return b
    raise ValueError(f"{n_faces} faces exceed the largest bucket {buckets[-1]}")


@dataclass
class _Entry:
    mode: str
    graphs: tuple[Any, ...] = ()  # graph: (swap,); segmented: (crops, paste)
    staged: Staged | None = None
    pred_static: torch.Tensor | None = None
    error: str = ""


@dataclass
class GraphRunner:
    """Runs a :class:`SwapProgram` on slots, replaying captured graphs where it can."""

    program: SwapProgram
    use_graphs: bool = True
    warmup_runs: int = 2
    _entries: dict[tuple[int, int, int], _Entry] = field(default_factory=dict)
    _last_generated: Any = None  # event: the previous segmented generator call is done

    @property
    def modes(self) -> dict[str, str]:
        """``"slot/bucket/window" -> mode`` (with the capture errors that led there)."""
        return {f"{s}/{b}/{w}px": e.mode + (f" ({e.error})" if e.error else "")
                for (s, b, w), e in sorted(self._entries.items())}

    def _window(self, window_px: int | None) -> int:
        return window_px or self.program.swapper.window_px

    def prepare(self, slot: Slot, n_faces: int, window_px: int | None = None) -> str:
        """Capture (or decide not to) for this slot, bucket and paste window (None: the
        swapper's own); returns its mode."""
        window = self._window(window_px)
        key = (slot.index, n_faces, window)
        if key not in self._entries:
            with torch.inference_mode():
                self._entries[key] = self._capture(slot, n_faces, window)
        return self._entries[key].mode

    def run(self, slot: Slot, n_faces: int, window_px: int | None = None) -> None:
        """Queue the program for ``n_faces`` (a bucket), pasting in ``window_px``, on the
        current stream (the slot's)."""
        window = self._window(window_px)
        self.prepare(slot, n_faces, window)
        entry = self._entries[(slot.index, n_faces, window)]
        program = self.program
        with torch.inference_mode():
            if n_faces == 0:
                return
            if entry.mode == "eager":
                staged = program.prepare(slot, n_faces, window_px=window)
                assert staged is not None
                program.finish(slot, staged, self._generate(slot, staged))
                self._generated(slot)
            elif entry.mode == "graph":
                entry.graphs[0].replay()
            else:
                assert entry.staged is not None and entry.pred_static is not None
                entry.graphs[0].replay()
                entry.pred_static.copy_(self._generate(slot, entry.staged))
                self._generated(slot)
                entry.graphs[1].replay()

    def _generate(self, slot: Slot, staged: Staged) -> torch.Tensor:
        """The generator call, queued after the previous tick's generator output was consumed
        (an engine replaying its own CUDA graph shares its buffers between slots); the caller
        consumes the output and then calls :meth:`_generated`."""
        if slot.cuda and self._last_generated is not None:
            torch.cuda.current_stream(slot.device).wait_event(self._last_generated)
        return self.program.generate(staged)

    def _generated(self, slot: Slot) -> None:
        if slot.cuda:
            slot.generated.record(torch.cuda.current_stream(slot.device))
            self._last_generated = slot.generated

    def _engine_graphs(self) -> bool:
        return bool(getattr(self.program.swapper.engine, "cuda_graphs", False))

    def _capture(self, slot: Slot, n_faces: int, window_px: int) -> _Entry:
        if not (self.use_graphs and slot.cuda):
            return _Entry("eager")
        if n_faces == 0:
            return _Entry("graph")
        errors: list[str] = []
        modes = ("segmented",) if self._engine_graphs() else ("graph", "segmented")
        for mode in modes:
            try:
                entry = (self._capture_whole(slot, n_faces, window_px) if mode == "graph"
                         else self._capture_segmented(slot, n_faces, window_px))
            except Exception as exc:  # capture refuses host syncs etc.: fall back, say why
                torch.cuda.synchronize(slot.device)
                errors.append(f"{mode}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                log.warning("CUDA graph capture (%s) failed for slot %d, %d faces, %d px "
                            "window: %s", mode, slot.index, n_faces, window_px, errors[-1])
                continue
            entry.error = "; ".join(errors)
            return entry
        return _Entry("eager", error="; ".join(errors))

    def _capture_whole(self, slot: Slot, n_faces: int, window_px: int) -> _Entry:
        program = self.program
        return _Entry("graph", (_capture(
            slot, lambda: program.run(slot, n_faces, window_px=window_px), self.warmup_runs,
            slot.graph_pool),))

    def _capture_segmented(self, slot: Slot, n_faces: int, window_px: int) -> _Entry:
        program = self.program
        holder: list[Staged] = []

        def crops() -> None:
            holder.clear()
            staged = program.prepare(slot, n_faces, window_px=window_px)
            assert staged is not None
            holder.append(staged)

        crops_graph = _capture(slot, crops, self.warmup_runs, slot.graph_pool)
        staged = holder[0]
        # the generator runs eagerly between the graphs (or replays its own graph)
        side = new_stream(slot.device)
        side.wait_stream(torch.cuda.current_stream(slot.device))
        with torch.cuda.stream(side):
            crops_graph.replay()
            pred_static = program.generate(staged).clone()
        torch.cuda.current_stream(slot.device).wait_stream(side)
        torch.cuda.synchronize(slot.device)
        paste = _capture(slot, lambda: program.finish(slot, staged, pred_static),
                         self.warmup_runs, slot.graph_pool)
        return _Entry("segmented", (crops_graph, paste), staged, pred_static)


def _capture(slot: Slot, fn: Callable[[], None], warmup_runs: int, pool: Any = None) -> Any:
    """Eager runs of ``fn`` on a side stream (cuDNN picks algorithms, an engine captures
    itself), then one CUDA graph of it, its memory in ``pool`` (None: a pool of its own)."""
    # of its own (see livecam.engines.cuda_streams); the slot's capture stream when sharing
    # its pool: a pool's freed blocks are reused only on the stream that freed them
    side = (slot.capture_stream if pool is not None and slot.capture_stream is not None
            else new_stream(slot.device))
    side.wait_stream(torch.cuda.current_stream(slot.device))
    with torch.cuda.stream(side):
        for _ in range(warmup_runs):
            fn()
    torch.cuda.current_stream(slot.device).wait_stream(side)
    torch.cuda.synchronize(slot.device)
    graph = torch.cuda.CUDAGraph()
    # thread_local: other streams of the process keep running their GPU work meanwhile
    with torch.cuda.graph(graph, pool=pool, stream=side, capture_error_mode="thread_local"):
        fn()
    torch.cuda.synchronize(slot.device)
    return graph

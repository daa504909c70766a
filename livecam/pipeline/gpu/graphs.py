"""CUDA-graph capture of the frame program, per (slot, face-count bucket).

A graph replays fixed device addresses, so each slot (its own buffers), each face count (its
own shapes) and each detection flag (ticks with and without the detector) gets its own
graphs. What is captured depends on the generator engine, and capture falls back rather than
fails, recording what happened (:attr:`GraphRunner.modes`):

1. ``graph``: the whole tick in one graph. Needs an engine whose forward is capturable inside
   someone else's graph (``cuda_graphs=False`` and no host reads).
2. ``segmented``: two graphs (analysis + alignment + crops; then colour + paste-back) with the
   generator call between them, eager or replaying the engine's *own* CUDA graph
   (``TorchEngine(cuda_graphs=True)`` records the host-side shape reads of its ONNX executor
   and captures itself; graphs cannot nest, so it cannot sit inside ours). Its output is
   copied into a static buffer the second graph reads.
3. ``eager``: no graph (CPU, ``use_graphs=False``, or capture failed).

Buckets: face counts round up to the next bucket (padding slots are invalid and only cost a
little compute), so a handful of graphs cover every count up to ``max_faces``.
Only the scheduler thread calls :meth:`GraphRunner.run`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from livecam.pipeline.gpu.program import FrameProgram, Staged
from livecam.pipeline.gpu.slots import Slot

log = logging.getLogger(__name__)

MODES = ("graph", "segmented", "eager")


def face_buckets(max_faces: int) -> tuple[int, ...]:
    """0, 1, 2, 4, 8, ... up to and including ``max_faces``."""
    out = [0, 1]
    while out[-1] < max_faces:
        out.append(min(out[-1] * 2, max_faces))
    return tuple(sorted(set(out)))


def bucket_for(n_faces: int, buckets: tuple[int, ...]) -> int:
    for b in buckets:
        if b >= n_faces:
            return b
    raise ValueError(f"{n_faces} faces exceed the largest bucket {buckets[-1]}")


@dataclass
class _Entry:
    mode: str
    graphs: tuple[Any, ...] = ()
    staged: Staged | None = None
    pred_static: torch.Tensor | None = None
    error: str = ""


@dataclass
class GraphRunner:
    """Runs a :class:`FrameProgram` on slots, replaying captured graphs where it can."""

    program: FrameProgram
    use_graphs: bool = True
    warmup_runs: int = 2
    _entries: dict[tuple[int, int, bool], _Entry] = field(default_factory=dict)

    @property
    def modes(self) -> dict[str, str]:
        """``"slot/bucket[/detect]" -> mode`` (with the capture errors that led there)."""
        return {f"{s}/{b}{'/detect' if d else ''}": e.mode + (f" ({e.error})" if e.error else "")
                for (s, b, d), e in sorted(self._entries.items())}

    def prepare(self, slot: Slot, n_faces: int, detect: bool = True) -> str:
        """Capture (or decide not to) for this slot, bucket and detection flag; returns the
        mode."""
        key = (slot.index, n_faces, detect)
        if key not in self._entries:
            with torch.inference_mode():
                self._entries[key] = self._capture(slot, n_faces, detect)
        return self._entries[key].mode

    def run(self, slot: Slot, n_faces: int, detect: bool = True) -> None:
        """Queue the program for ``n_faces`` (a bucket) on the current stream; ``detect`` runs
        the detector this tick."""
        key = (slot.index, n_faces, detect)
        if key not in self._entries:
            self.prepare(slot, n_faces, detect)
        entry = self._entries[key]
        with torch.inference_mode():
            if entry.mode == "graph":
                entry.graphs[0].replay()
            elif entry.mode == "segmented":
                assert entry.staged is not None and entry.pred_static is not None
                entry.graphs[0].replay()
                entry.pred_static.copy_(self.program.generate(entry.staged))
                entry.graphs[1].replay()
            else:
                self.program.run(slot, n_faces, detect=detect)

    def _engine_graphs(self) -> bool:
        return bool(getattr(self.program.swapper.engine, "cuda_graphs", False))

    def _capture(self, slot: Slot, n_faces: int, detect: bool) -> _Entry:
        if not (self.use_graphs and slot.cuda):
            return _Entry("eager")
        saved = self.program.roi_state.clone()
        errors: list[str] = []
        modes = ("segmented",) if self._engine_graphs() or n_faces == 0 else (
            "graph", "segmented")
        if n_faces == 0:
            modes = ("graph",)
        for mode in modes:
            try:
                self._warm_up(slot, n_faces, detect)
                entry = (self._capture_whole(slot, n_faces, detect) if mode == "graph"
                         else self._capture_segmented(slot, n_faces, detect))
            except Exception as exc:  # capture refuses host syncs etc.: fall back, say why
                torch.cuda.synchronize(slot.device)
                errors.append(f"{mode}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                log.warning("CUDA graph capture (%s) failed for slot %d, %d faces: %s",
                            mode, slot.index, n_faces, errors[-1])
                continue
            finally:
                self.program.roi_state.copy_(saved)
            entry.error = "; ".join(errors)
            return entry
        return _Entry("eager", error="; ".join(errors))

    def _warm_up(self, slot: Slot, n_faces: int, detect: bool) -> None:
        """Eager runs on a side stream: cuDNN picks algorithms, the engine captures itself."""
        side = torch.cuda.Stream(slot.device)
        side.wait_stream(torch.cuda.current_stream(slot.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup_runs):
                self.program.run(slot, n_faces, detect=detect)
        torch.cuda.current_stream(slot.device).wait_stream(side)
        torch.cuda.synchronize(slot.device)

    def _capture_whole(self, slot: Slot, n_faces: int, detect: bool) -> _Entry:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.program.run(slot, n_faces, detect=detect)
        torch.cuda.synchronize(slot.device)
        return _Entry("graph", (graph,))

    def _capture_segmented(self, slot: Slot, n_faces: int, detect: bool) -> _Entry:
        program = self.program
        first = torch.cuda.CUDAGraph()
        with torch.cuda.graph(first):
            staged = program.stage(slot, n_faces, detect=detect)
        assert staged is not None
        # the generator runs eagerly between the graphs (or replays its own graph)
        side = torch.cuda.Stream(slot.device)
        side.wait_stream(torch.cuda.current_stream(slot.device))
        with torch.cuda.stream(side):
            first.replay()
            pred_static = program.generate(staged).clone()
        torch.cuda.current_stream(slot.device).wait_stream(side)
        torch.cuda.synchronize(slot.device)
        second = torch.cuda.CUDAGraph()
        with torch.cuda.graph(second):
            program.finish(slot, staged, pred_static)
        torch.cuda.synchronize(slot.device)
        return _Entry("segmented", (first, second), staged, pred_static)

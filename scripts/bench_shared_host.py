"""The host work of the parts that every stream of one process shares, per frame, on a CPU.

    python -m scripts.bench_shared_host [--streams 1,16,32] [--frames 3000]
                                        [--json bench_shared_host.json]

With many streams the shared parts run serially for all of them: the GPU swap hub picks each
tick's requests under its lock (:meth:`GpuSwapHub._launch`, the tick's face rows, the ticks
collected), one thread runs each batch of the face networks' calls and reads its outputs
(:meth:`SharedFaceNetworks._run`: the detections and meshes of every frame in the batch), and
each stream's tile search reads its 1080p frame's 28 tiles (:meth:`GpuTileSearch.take`).
Their own host work, without the GPU's: the hub's scheduler is a stand-in that records the
tick (``scripts/bench_host.py`` runs the real one, on torch's CPU device), the networks' graph
calls do nothing and their host outputs are set once (2 detections a frame, 1 face), the tile
search's outputs are set by hand. CPU time of the thread (``time.thread_time_ns``), the best
of three runs, µs per frame; the hub with 3 frames of each stream waiting, as under load.
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from livecam.analysis.detect import tile_crop, tiles
from livecam.analysis.gpu.batching import Request
from livecam.analysis.gpu.calls import CapturedCall, FrameStack, mesh_buckets
from livecam.analysis.gpu.shared import SharedFaceNetworks
from livecam.analysis.gpu.tiles import SLOTS_PER_TILE, GpuTileSearch, _Layout
from livecam.analysis.roi import Roi
from livecam.gpupipe.hub import GpuSwapHub
from livecam.gpupipe.request import SwapRequest
from livecam.gpupipe.slots import FrameBuffers, SlotShape

SIZE_HW = (96, 160)


class _Ring:
    """A stand-in for the hub's scheduler: ``slots`` ticks in flight, each only counted."""

    def __init__(self, shape: SlotShape, slots: int = 3) -> None:
        self.shape, self.slots = shape, slots
        self._ticks: list[int] = []
        self.slot = SimpleNamespace(wait=lambda: None)

    @property
    def ring_full(self) -> bool:
        return len(self._ticks) >= self.slots

    def submit(self, frames_in: Any, frames_out: Any, rows: Any, ready: Any,
               hands: Any = None) -> None:
        self._ticks.append(len(rows))

    def oldest_slot(self) -> Any:
        return self.slot

    def collect(self) -> Any:
        n = self._ticks.pop(0)
        return SimpleNamespace(fits=np.ones(n, bool), gpu_latency_ms=float("nan"),
                               window_px=640)

    def close(self) -> None:
        pass


def hub_us(n: int, frames: int, depth: int = 3) -> float:
    """The hub's host work per frame: ``n`` streams submit ``depth`` frames each, then the
    ticks are collected (each collect launches what waits)."""
    hub = GpuSwapHub(None, emap=lambda: np.eye(4, dtype=np.float32),
                     source_embedding=lambda name: None, n_streams=n, max_faces=1,
                     collector_thread=False)
    hub._program = object()  # opened: the stand-in ring needs no program
    hub._rings[SIZE_HW] = _Ring(SlotShape(n, *SIZE_HW, n, 512))
    buffers = [FrameBuffers(*SIZE_HW, depth, pinned=False) for _ in range(n)]
    rng = np.random.default_rng(0)
    kps = rng.normal(0, 100, (1, 5, 2)).astype(np.float32)
    latents = rng.normal(0, 1, (1, 512)).astype(np.float32)
    done = 0
    t0 = time.thread_time_ns()
    while done < frames:
        requests = []
        for _ in range(depth):
            for s in range(n):
                request = SwapRequest(s, buffers[s], buffers[s].take(), kps, latents)
                hub.submit(request)
                requests.append(request)
        while hub.collect_next(0.0):
            pass
        for request in requests:
            request.buffers.give_back(request.index)
        done += len(requests)
    return (time.thread_time_ns() - t0) / done / 1e3


def _shared(n: int, detections: int = 2) -> SharedFaceNetworks:
    """Shared networks of ``n`` streams whose graph calls do nothing and whose host outputs
    hold ``detections`` valid detections a frame and a present mesh in every row."""
    shared = SharedFaceNetworks(device="cpu", n_streams=n, max_rois=1)
    shared._detectors = [object()]
    b, m = shared.frames_per_call, shared.max_mesh
    shared._index_host = torch.zeros((n,), dtype=torch.int64)
    shared._rows_host = torch.zeros((m, 5))
    shared._mesh_host = (torch.rand((m, 468, 3)) * 500, torch.ones((m,)))
    valid = torch.zeros((b, 64), dtype=torch.bool)
    valid[:, :detections] = True
    shared._det_host = (torch.rand((b, 64, 4)) * 100, torch.rand((b, 64, 6, 2)) * 100,
                        torch.rand((b, 64)), valid)
    cpu = torch.device("cpu")
    stack = FrameStack(n, *SIZE_HW, cpu)
    call = CapturedCall(_noop, device=cpu, stream=None, use_graph=False)
    for k in mesh_buckets(b):
        stack.detect[k] = call
    for k in mesh_buckets(m):
        stack.mesh[k] = call
    shared._stacks[SIZE_HW] = stack
    return shared


def _noop() -> None:
    pass


def batch_us(n: int, frames: int) -> float:
    """One batch of ``n`` streams' calls (detect and a mesh on 1 face each) per round: the
    batch thread's host work per frame."""
    shared = _shared(n)
    roi = Roi(80.0, 48.0, 60.0, 0.1)
    done = 0
    t0 = time.thread_time_ns()
    while done < frames:
        batch = [Request(k, SIZE_HW, detect=True, rois=[roi], uploaded=None)
                 for k in range(n)]
        shared._run(batch)
        done += n
    return (time.thread_time_ns() - t0) / done / 1e3


def tiles_us(calls: int) -> float:
    """One 1080p tile search's ``take`` (28 tiles, none found), µs per call."""
    w, h = 1920, 1080
    crops = [tile_crop(t, w, h) for t in tiles(w, h, 384)]
    layout = _Layout(crops)
    rng = np.random.default_rng(0)
    n = len(crops)
    valid = np.zeros((n, SLOTS_PER_TILE), bool)
    valid[3, 0] = valid[4, 1] = True
    layout.host = tuple(torch.from_numpy(a) for a in (
        rng.uniform(0, 1000, (n, SLOTS_PER_TILE, 4)).astype(np.float16),
        rng.uniform(0, 1000, (n, SLOTS_PER_TILE, 6, 2)).astype(np.float16),
        rng.random((n, SLOTS_PER_TILE)).astype(np.float16), valid))
    search = GpuTileSearch.__new__(GpuTileSearch)  # no model: its outputs are set above
    search._stream = None
    t0 = time.thread_time_ns()
    for _ in range(calls):
        search._pending = (layout, h, w, [])
        search.take()
    return (time.thread_time_ns() - t0) / calls / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="1,16,32")
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--json", type=Path, default=Path("bench_shared_host.json"))
    args = parser.parse_args(argv)
    rows: dict[str, dict[str, float]] = {}
    for n in (int(x) for x in args.streams.split(",") if x):
        rows[str(n)] = {"hub_us": min(hub_us(n, args.frames) for _ in range(3)),
                        "batch_us": min(batch_us(n, args.frames) for _ in range(3))}
    take = min(tiles_us(max(1, args.frames // 3)) for _ in range(3))
    print("| streams | hub us/frame | face networks' batch us/frame |")
    print("|---|---|---|")
    for streams, row in rows.items():
        print(f"| {streams} | {row['hub_us']:.1f} | {row['batch_us']:.1f} |")
    print(f"\ntile search take(), 1080p (28 tiles): {take:.1f} us a search")
    args.json.write_text(json.dumps({"streams": rows, "tile_take_us": take}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The host work of the parts that every stream of one process shares, per frame, on a CPU.

    python -m scripts.bench_shared_host [--streams 1,16,32] [--frames 3000]
                                        [--edge-streams 1,16] [--edge-devices meta,cpu]
                                        [--edge-paths none,host,device] [--edge-frames 64]
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
Then the follower's calls of a 1080p frame, stream by stream, with the edge search's strips
built on the host (the path before) and on the device (:func:`edge_us`), 1 and 16 streams,
and what the swap stage's collector does with a 1080p output frame (:func:`collect_us`).
Prints the tables and writes JSON.
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
from torch.overrides import TorchFunctionMode

from livecam.analysis.detect import tile_crop, tiles
from livecam.analysis.roi import Roi
from livecam.gpupipe.hub import GpuSwapHub
from livecam.gpupipe.networks.batching import Request
from livecam.gpupipe.networks.calls import CapturedCall, FrameStack, mesh_buckets
from livecam.gpupipe.networks.shared import SharedFaceNetworks
from livecam.gpupipe.networks.tiles import SLOTS_PER_TILE, GpuTileSearch, _Batch
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


def collect_us(frames: int, frame_hw: tuple[int, int] = (1080, 1920), held: int = 3) -> float:
    """What the GPU swap stage's collector does with a 1080p frame's output buffer, thread
    CPU µs a frame: the frame handed on (:meth:`FrameBuffers.hand_out`; before it, a copy
    of the buffer) and the index given back, the last ``held`` frames kept alive (the
    output's mailbox and sink)."""
    buffers = FrameBuffers(*frame_hw, 4, pinned=False)
    hand_out = getattr(buffers, "hand_out", None)
    kept: list[np.ndarray] = []
    t0 = time.thread_time_ns()
    for _ in range(frames):
        k = buffers.take()
        if hand_out is not None:
            out = hand_out(k)
        else:
            out = buffers.outputs_numpy[k].copy()
            buffers.give_back(k)
        kept = [*kept[-held + 1:], out]
    return (time.thread_time_ns() - t0) / frames / 1e3


def _shared(n: int, detections: int = 2, device: str = "cpu") -> SharedFaceNetworks:
    """Shared networks of ``n`` streams whose graph calls do nothing and whose host outputs
    hold ``detections`` valid detections a frame and a present mesh in every row."""
    shared = SharedFaceNetworks(device=device, n_streams=n, max_rois=1)
    shared._detectors = [object()]
    m = shared.max_mesh
    shared._rows_host = torch.zeros((m, 5))
    rand = torch.Generator().manual_seed(0)  # the same outputs in every run
    shared._mesh_host = (torch.rand((m, 468, 3), generator=rand) * 500, torch.ones((m,)))
    shared._stacks[SIZE_HW] = _stack(shared, n, SIZE_HW, torch.device("cpu"),
                                     detections=detections)
    return shared


def _stack(shared: SharedFaceNetworks, n: int, size_hw: tuple[int, int], device: torch.device,
           *, per_stream: int = 1, detections: int = 2) -> FrameStack:
    """A stack of ``n`` streams' frames (``per_stream`` pictures each) whose graph calls do
    nothing and whose detector's host outputs hold ``detections`` valid detections a frame."""
    b = shared.frames_per_call * per_stream
    stack = FrameStack(n, *size_hw, device, per_call=b, per_stream=per_stream)
    valid = torch.zeros((b, 64), dtype=torch.bool)
    valid[:, :detections] = True
    rand = torch.Generator().manual_seed(0)  # the same detections in every run
    stack.det_host = (torch.rand((b, 64, 4), generator=rand) * 100,
                      torch.rand((b, 64, 6, 2), generator=rand) * 100,
                      torch.rand((b, 64), generator=rand), valid)
    call = CapturedCall(_noop, device=device, stream=None, use_graph=False)
    for k in mesh_buckets(shared.frames_per_call):
        stack.detect[k * per_stream] = call
    for k in mesh_buckets(shared.max_mesh):
        stack.mesh[k] = call
    return stack


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
    batch = _Batch(crops)
    rng = np.random.default_rng(0)
    n = len(crops)
    valid = np.zeros((n, SLOTS_PER_TILE), bool)
    valid[3, 0] = valid[4, 1] = True
    search = GpuTileSearch.__new__(GpuTileSearch)  # no model: its outputs are set here
    search._hosts = {(h, w): tuple(torch.from_numpy(a) for a in (
        rng.uniform(0, 1000, (n, SLOTS_PER_TILE, 4)).astype(np.float16),
        rng.uniform(0, 1000, (n, SLOTS_PER_TILE, 6, 2)).astype(np.float16),
        rng.random((n, SLOTS_PER_TILE)).astype(np.float16), valid))}
    search._done = None
    t0 = time.thread_time_ns()
    for _ in range(calls):
        search._pending = (batch, h, w, [])
        search.take()
    return (time.thread_time_ns() - t0) / calls / 1e3


def _edge_networks(n: int, frame_hw: tuple[int, int], device: str) -> list[Any]:
    """``n`` streams' networks (keeping 3 frames for the swap) on shared networks whose graph
    calls do nothing, with stacks for ``frame_hw`` and its edge strips' pictures on
    ``device``."""
    from livecam.analysis.edges import strip_places
    from livecam.analysis.second_look import SECOND_LOOK_PX, SECOND_LOOK_SPANS

    shared = _shared(n, device=device)
    dev = torch.device(device)
    counts: dict[tuple[int, int], int] = {}
    for p in strip_places(*frame_hw):
        counts[(len(p.rows), len(p.cols))] = counts.get((len(p.rows), len(p.cols)), 0) + 1
    looks = (SECOND_LOOK_PX, SECOND_LOOK_PX)  # an edge hit's second look, host and device
    counts[looks] = len(SECOND_LOOK_SPANS)
    shared._stacks[frame_hw] = _stack(shared, n, frame_hw, dev)
    for size, count in counts.items():  # the pictures' (the host path's are frames too)
        shared._picture_stacks[size] = _stack(shared, n, size, dev, per_stream=count)
        shared._stacks[size] = _stack(shared, n, size, dev)
    nets = [shared.slot_for(k, keep_frames=3) for k in range(n)]
    for net in nets:
        net.open()
    return nets


class _LaunchOnly:
    """torch for :mod:`livecam.gpupipe.networks.client` on the ``meta`` device, whose
    ``index_select`` runs a shape function in Python (0.6 ms a call here): a call on a
    one-pixel CPU tensor instead, about a CUDA launch's host cost."""

    _one = torch.zeros((1, 1, 3), dtype=torch.uint8)
    _at = torch.zeros((1,), dtype=torch.int64)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    def index_select(self, source: Any, dim: int, index: Any, out: Any = None) -> Any:
        return torch.index_select(self._one, dim, self._at)

    @classmethod
    def index_out(cls, source: Any, indices: Any, *, out: Any) -> None:
        """:func:`livecam.gpupipe.networks.client.index_out`'s stand-in: one launch."""
        torch.index_select(cls._one, 0, cls._at)


class _TorchCalls(TorchFunctionMode):
    """Counts the torch functions and tensor methods called from Python inside (on CUDA
    each lets the GIL go and queues to get it back) and the pictures' gathers."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))

    def __enter__(self) -> _TorchCalls:
        import livecam.gpupipe.networks.client as client

        super().__enter__()
        self._index_out = getattr(client, "index_out", None)
        if self._index_out is not None:  # torch.ops calls do not pass through the mode

            def index_out(*args: Any, **kwargs: Any) -> None:
                self.count += 1
                self._index_out(*args, **kwargs)

            client.index_out = index_out
        return self

    def __exit__(self, *exc: object) -> None:
        import livecam.gpupipe.networks.client as client

        if self._index_out is not None:
            client.index_out = self._index_out
        super().__exit__(*exc)


def edge_us(n: int, frames: int, device: str = "meta",
            frame_hw: tuple[int, int] = (1080, 1920),
            paths: tuple[str, ...] = ("none", "host", "device")) -> dict[str, float]:
    """The follower's calls of one frame, per stream in turn (``n`` streams, each its own
    1080p frame each time): detect, the edge search, a mesh on 1 face. ``none``: without the
    edge search; ``host``: its strip pictures built on the host and each uploaded as a frame
    (the path before); ``device``: built from the frame already uploaded
    (:meth:`StreamFaceNetworks.detect_strips`). Thread CPU µs per frame and stream (take
    ``frames`` at least twice ``n``: a stream's frame seen again is not uploaded again), then
    the torch calls from Python (:class:`_TorchCalls`) and the batches of the streams' calls
    (:class:`~livecam.gpupipe.networks.batching.Batcher` runs), per frame and stream.
    ``device`` ``meta``: the uploads and the device's copies are torch calls that do no work
    (as on CUDA, where they run on the GPU; the pictures' index selections stand-ins of a
    launch's cost, :class:`_LaunchOnly`); ``cpu``: they run on this thread too.
    ``host_writes``: the pictures made and copied into a staging buffer alone (what the host
    path writes on any device)."""
    import livecam.gpupipe.networks.client as client
    index_out = getattr(client, "index_out", None)
    from livecam.analysis.edges import StripSearch, edge_strips

    nets = _edge_networks(n, frame_hw, device)
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (*frame_hw, 3), dtype=np.uint8) for _ in range(n + 1)]
    roi = Roi(frame_hw[1] / 2, frame_hw[0] / 2, 300.0, 0.0)
    searches = {"none": [None] * n,
                "host": [StripSearch(SimpleNamespace(detect=net.detect)) for net in nets],
                "device": [StripSearch(net) for net in nets]}
    out: dict[str, float] = {}
    for name, search in searches.items():
        if name not in paths:
            continue
        client.torch = _LaunchOnly() if device == "meta" else torch  # type: ignore[assignment]
        if hasattr(client, "index_out"):  # the pictures of one size in one gather
            client.index_out = _LaunchOnly.index_out if device == "meta" else index_out
        def follow(done: int, search: list[Any] = search) -> None:
            for k, net in enumerate(nets):
                image = images[(done + k) % len(images)]
                if search[k] is not None:  # as the follower: asked before the frame's call
                    search[k].ahead(image)
                net.detect(image)
                if search[k] is not None:
                    search[k].find(image)
                net.landmarks(image, [roi])

        best = float("inf")
        for _ in range(3):
            done = 0
            t0 = time.thread_time_ns()
            while done < frames:
                follow(done)
                done += n
            best = min(best, (time.thread_time_ns() - t0) / done / 1e3)
        out[name] = best
        # the torch calls from Python and the batches (each a round trip through the streams'
        # batches and, on CUDA, a wait for the GPU) of as many frames again
        batcher = nets[0].shared.batcher
        run, batches = batcher._run, [0]

        def counted(batch: list[Any], run: Any = run, batches: list[int] = batches) -> None:
            batches[0] += 1
            run(batch)

        batcher._run = counted
        with _TorchCalls() as calls:
            done = 0
            while done < frames:
                follow(done)
                done += n
        batcher._run = run
        out[f"{name}_torch_calls"] = calls.count / done
        out[f"{name}_batches"] = batches[0] / done
    client.torch = torch
    if hasattr(client, "index_out"):
        client.index_out = index_out
    if "host" not in paths:
        return out
    staging = np.empty((frame_hw[0], frame_hw[0], 3), np.uint8)
    t0 = time.thread_time_ns()
    for k in range(frames):
        for strip in edge_strips(images[k % len(images)]):
            np.copyto(staging, strip.image_bgr)
    out["host_writes"] = (time.thread_time_ns() - t0) / frames / 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="1,16,32")
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--json", type=Path, default=Path("bench_shared_host.json"))
    parser.add_argument("--edge-streams", default="1,16")
    parser.add_argument("--edge-devices", default="meta,cpu")
    parser.add_argument("--edge-paths", default="none,host,device",
                        help="which of the follower's paths to time (none: no edge search, "
                        "host: pictures built on the host, device: on the device)")
    parser.add_argument("--edge-frames", type=int, default=64,
                        help="1080p frames a stream count's edge-search run takes")
    args = parser.parse_args(argv)
    rows: dict[str, dict[str, float]] = {}
    for n in (int(x) for x in args.streams.split(",") if x):
        rows[str(n)] = {"hub_us": min(hub_us(n, args.frames) for _ in range(3)),
                        "batch_us": min(batch_us(n, args.frames) for _ in range(3))}
    take = min(tiles_us(max(1, args.frames // 3)) for _ in range(3))
    collect = min(collect_us(max(1, args.frames // 10)) for _ in range(3))
    paths = tuple(args.edge_paths.split(","))
    edge = {f"{n} {device}": edge_us(n, args.edge_frames, device, paths=paths)
            for device in args.edge_devices.split(",") if device
            for n in (int(x) for x in args.edge_streams.split(",") if x)}
    print("| streams | hub us/frame | face networks' batch us/frame |")
    print("|---|---|---|")
    for streams, row in rows.items():
        print(f"| {streams} | {row['hub_us']:.1f} | {row['batch_us']:.1f} |")
    print(f"\ntile search take(), 1080p (28 tiles): {take:.1f} us a search")
    print(f"the swap collector's 1080p output frame, handed on: {collect:.1f} us a frame")
    print("\n| streams, torch device | follower calls, no edge search | edge search: host "
          "pictures | edge search: device pictures | host pictures' writes alone |  "
          "(us/frame/stream)")
    print("|---|---|---|---|---|")
    for streams, e in edge.items():
        print(" | ".join([f"| {streams}", *(f"{e[k]:.0f}" if k in e else "-" for k in (
            "none", "host", "device", "host_writes"))]) + " |")
    print("\n| streams, torch device | torch calls / batches a frame and stream: no edge "
          "search | host pictures | device pictures |")
    print("|---|---|---|---|")
    for streams, e in edge.items():
        print(" | ".join([f"| {streams}", *(
            f"{e[f'{k}_torch_calls']:.1f} / {e[f'{k}_batches']:.2f}" if f"{k}_batches" in e
            else "-" for k in ("none", "host", "device"))]) + " |")
    args.json.write_text(json.dumps({"streams": rows, "tile_take_us": take,
                                     "collect_us": collect, "edge": edge},
                                    indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

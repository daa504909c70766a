"""Measurement loops of the GPU benchmark: latency, throughput, paced streams, stage times,
the naive baseline and the arithmetic floor (see ``scripts/bench_gpu.py``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from scripts.bench_gpu_scenes import Scene

BUDGET_MS = 1000.0 / 30.0


def percentiles(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, np.float64)
    if arr.size == 0:
        return {"p50": float("nan"), "p99": float("nan"), "mean": float("nan"), "n": 0}
    return {"p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99)),
            "mean": float(arr.mean()), "n": int(arr.size)}


def fill_for(scene: Scene, latents: np.ndarray, first: dict[Any, bool]) -> Any:
    """A fill callback writing the scene's frames once per slot and the face inputs per tick."""
    import torch

    n = scene.n_faces

    def fill(slot: Any) -> None:
        if not first.get(slot.index):
            slot.frames_in_host.numpy()[:] = scene.frames_bgr[slot.index % len(scene.frames_bgr)]
            first[slot.index] = True
        fh = slot.faces_host
        fh.frame_index[:n] = torch.from_numpy(scene.face_frame_index)
        fh.valid[:n] = True
        fh.latents[:n] = torch.from_numpy(latents[:n])
        fh.roi[:n] = torch.from_numpy(scene.rois)
        fh.roi_override[:n] = not first.get("started", False)
        first["started"] = True

    return fill


def run_latency(sched: Any, scene: Scene, latents: np.ndarray, ticks: int) -> dict[str, Any]:
    first: dict[Any, bool] = {}
    fill = fill_for(scene, latents, first)
    host, gpu, fits, present = [], [], [], []
    every = _detect_every(sched)
    for k in range(ticks):
        sched.submit(fill, scene.n_faces, detect=k % every == 0)
        r = sched.collect()
        host.append(r.host_latency_ms)
        gpu.append(r.gpu_latency_ms)
        fits.append(bool(r.fits.all()))
        present.append(float(r.presence.mean()) if r.n_faces else 1.0)
    warm = min(5, ticks // 5)
    return {"host_latency_ms": percentiles(host[warm:]), "gpu_latency_ms": percentiles(gpu[warm:]),
            "all_faces_fit_window": all(fits), "mean_presence": float(np.mean(present))}


def run_throughput(sched: Any, scene: Scene, latents: np.ndarray, ticks: int) -> dict[str, Any]:
    first: dict[Any, bool] = {}
    fill = fill_for(scene, latents, first)
    every = _detect_every(sched)
    for _ in range(sched.n_slots):  # fill the ring before timing
        sched.submit(fill, scene.n_faces)
    while sched.in_flight:
        sched.collect()
    host = []
    allocs = _alloc_count(sched.device)
    t0 = time.perf_counter()
    for k in range(ticks):
        if sched.ring_full:
            host.append(sched.collect().host_latency_ms)
        sched.submit(fill, scene.n_faces, detect=k % every == 0)
    while sched.in_flight:
        host.append(sched.collect().host_latency_ms)
    wall = time.perf_counter() - t0
    allocs = _alloc_count(sched.device) - allocs
    return {"ticks_per_s": ticks / wall, "frames_per_s": ticks * len(scene.frames_bgr[0]) / wall,
            "faces_per_s": ticks * scene.n_faces / wall,
            "host_latency_ms_pipelined": percentiles(host),
            "device_allocations_per_tick": allocs / ticks if allocs >= 0 else None}


def _alloc_count(device: Any) -> int:
    import torch

    if device.type != "cuda":
        return -(10 ** 9)
    torch.cuda.synchronize(device)
    return int(torch.cuda.memory_stats(device)["allocation.all.allocated"])


def run_paced(sched: Any, scene: Scene, latents: np.ndarray, ticks: int) -> dict[str, Any]:
    """Ticks at 30 per second (every stream delivers a frame each 33.3 ms); each tick's
    result is waited for as soon as it is submitted, so its latency is measured exactly."""
    first: dict[Any, bool] = {}
    fill = fill_for(scene, latents, first)
    host, gpu, late = [], [], 0
    period = BUDGET_MS / 1000.0
    every = _detect_every(sched)
    warm = min(5, ticks // 5)
    t_next = time.perf_counter()
    for k in range(ticks):
        now = time.perf_counter()
        if now < t_next:
            time.sleep(t_next - now)
        elif now - t_next > 0.25 * period and k > warm:
            # the previous tick overran its period: the streams would back up (counted after
            # the same warm-up ticks that the latency statistics leave out)
            late += 1
        t_next += period
        sched.submit(fill, scene.n_faces, detect=k % every == 0)
        r = sched.collect()
        host.append(r.host_latency_ms)
        gpu.append(r.gpu_latency_ms)
    stats = percentiles(host[warm:])
    return {"latency_ms": stats, "gpu_latency_ms": percentiles(gpu[warm:]), "late_ticks": late,
            "holds": bool(stats["p99"] <= BUDGET_MS and late <= ticks // 50)}


def _detect_every(sched: Any) -> int:
    return max(1, int(getattr(sched, "detect_every", 1)))


def run_stages(sched: Any, scene: Scene, latents: np.ndarray, ticks: int) -> dict[str, float]:
    """Mean per-stage device ms of an eager run (no graph) on slot 0, CUDA events between."""
    import torch

    from livecam.gpupipe.timing import StageTimer

    first: dict[Any, bool] = {}
    fill = fill_for(scene, latents, first)
    slot = sched.ring.slots[0]
    fill(slot)
    timer = StageTimer(sched.device)
    totals: dict[str, list[float]] = {}
    for _ in range(ticks):
        with slot.on_stream(), torch.inference_mode():
            timer.start()
            slot.upload()
            timer("upload")
            sched.program.run(slot, scene.n_faces, timer)
            slot.download()
            timer("download")
        slot.wait()
        for name, ms in timer.stages_ms().items():
            totals.setdefault(name, []).append(ms)
    warm = min(3, ticks // 3)
    return {k: float(np.mean(v[warm:])) for k, v in totals.items()}


def run_stage_graphs(sched: Any, scene: Scene, latents: np.ndarray, ticks: int
                     ) -> dict[str, float]:
    """Per-stage device ms with every stage captured as its own CUDA graph and replayed back
    to back, CUDA events between them: the GPU never waits for Python, so the deltas are the
    stages' GPU times (the eager breakdown is dominated by Python dispatch)."""
    import torch

    program, n = sched.program, scene.n_faces
    slot = sched.ring.slots[0]
    fill_for(scene, latents, {})(slot)
    slot.upload()
    torch.cuda.synchronize()
    with torch.inference_mode():
        graphs: dict[str, Any] = {}

        def capture(name: str, fn: Any) -> Any:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    out = fn()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = fn()
            graphs[name] = graph
            return out

        capture("detect", lambda: program.analyse(slot, 0, detect=True))
        capture("landmarks", lambda: program.analyse(slot, n, detect=False))
        staged = capture("align_crop", lambda: program.prepare_swap(slot, n))
        engine_graph = bool(getattr(program.swapper.engine, "cuda_graphs", False))
        if engine_graph:  # the engine replays its own graph (it cannot nest in ours)
            pred = program.generate(staged).clone()
        else:
            pred = capture("generate", lambda: program.generate(staged))
        capture("colour_paste", lambda: program.finish(slot, staged, pred))
        torch.cuda.synchronize()
        names = ["upload", "detect", "landmarks", "align_crop", "generate", "colour_paste",
                 "download"]
        totals: dict[str, list[float]] = {k: [] for k in names}
        stream = slot.stream
        for _ in range(ticks):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(len(names) + 1)]
            with torch.cuda.stream(stream):
                events[0].record()
                slot.frames_dev.copy_(slot.frames_in_host, non_blocking=True)
                events[1].record()
                for i, name in enumerate(names[1:-1], start=2):
                    if name == "generate" and engine_graph:
                        pred.copy_(program.generate(staged))
                    else:
                        graphs[name].replay()
                    events[i].record()
                slot.frames_out_host.copy_(slot.frames_dev, non_blocking=True)
                events[-1].record()
            events[-1].synchronize()
            for i, name in enumerate(names):
                totals[name].append(float(events[i].elapsed_time(events[i + 1])))
    warm = min(3, ticks // 3)
    return {k: float(np.median(v[warm:])) for k, v in totals.items()}


def run_baseline(baseline: Any, scene: Scene, latents: np.ndarray, ticks: int
                 ) -> tuple[dict[str, Any], np.ndarray]:
    frame = scene.frames_bgr[0][0]
    rois = scene.rois.copy()
    times = []
    out = frame
    t_all = time.perf_counter()
    every = max(1, int(getattr(baseline, "detect_every", 1)))
    for k in range(ticks):
        t0 = time.perf_counter_ns()
        out, rois = baseline.process(frame, rois, latents[:scene.n_faces], detect=k % every == 0)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    wall = time.perf_counter() - t_all
    warm = min(2, ticks // 3)
    return {"latency_ms": percentiles(times[warm:]), "frames_per_s": ticks / wall}, out


def measure_floor(engine: Any, device: Any, quick: bool) -> dict[str, float]:
    """Generator FLOPs per face (torch's counter) and the fp16 matmul peak measured here."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    feeds = {}
    for spec in engine.inputs:
        shape = [1 if not isinstance(d, int) or d <= 0 else d for d in spec.shape]
        shape[0] = 1
        feeds[spec.name] = torch.rand(shape, device=device)
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        engine.run_torch(feeds)
    flops = float(counter.get_total_flops())
    out = {"gflop_per_face": flops / 1e9, "ms_per_face_at_790_tflops": flops / 790e12 * 1e3}
    if device.type == "cuda":
        n = 8192
        a = torch.randn(n, n, device=device, dtype=torch.float16)
        b = torch.randn(n, n, device=device, dtype=torch.float16)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        reps = 10 if quick else 30
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        torch.cuda.synchronize()
        tflops = 2 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12
        out["measured_fp16_tflops"] = tflops
        out["ms_per_face_at_measured_peak"] = flops / (tflops * 1e12) * 1e3
    return out

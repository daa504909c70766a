"""Measurements of the GPU benchmark through ``livecam run`` itself (see ``bench_gpu.py``).

Every run is built by :func:`livecam.app.build_streams`, the function ``livecam run`` and
``livecam daemon`` call, with ``--set``-style overrides only: the same stages, hub, threads,
mailboxes and output as a user's run. A run is started, left to warm up, measured over a
window from its own metrics (counters, latencies, stage times), and stopped.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("bench_gpu")


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p99": pct(values, 99), "n": float(len(values))}


def make_identity(photo_bgr: np.ndarray, models_dir: str | None) -> Any:
    """An identity from one photo, its landmarks from the torch face mesh on the torch
    BlazeFace's region (the GPU machine has no mediapipe; the library stores the same)."""
    import torch

    from livecam.gpupipe.networks.facemesh import rois_from_detections
    from livecam.gpupipe.networks.models import load_blazeface, load_face_mesh
    from livecam.identity.model import Identity, IdentityPhoto

    with torch.inference_mode():
        frames = torch.from_numpy(photo_bgr)[None]
        det = load_blazeface("full", models_dir=models_dir)(frames)
        j = int(torch.argmax(det.scores[0].float() * det.valid[0]))
        rois = rois_from_detections(det.boxes_xyxy_px[0, j:j + 1], det.keypoints_xy_px[0, j:j + 1])
        mesh = load_face_mesh(models_dir=models_dir)(frames, torch.zeros(1, dtype=torch.long),
                                                     rois)
    lm = mesh.landmarks_px[0].numpy()
    photo = IdentityPhoto(sha256=hashlib.sha256(photo_bgr.tobytes()).hexdigest(),
                          texture_bgr=photo_bgr, landmarks_xy=lm[:, :2].copy(),
                          landmarks_z=lm[:, 2].copy())
    return Identity(name="astro", photos=(photo,))


def measure_run(config: Any, pairs: list[tuple[str, str]], identities: Any, *,
                warm_s: float, window_s: float,
                then: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Start ``livecam run``'s streams, warm up, measure a window, stop. Per stream: frames
    per second sent (new frames), capture→sink and capture→output-thread latency, each
    stage's time (``swap.gpu``: the swap's device time, upload to download), frames late
    (repeated by the output or dropped) in the window. ``then``: called with the running
    streams once the window is measured (a profiler's own window, which would slow the
    measured one: :func:`kernel_time`), its result kept as ``profile``."""
    from livecam.app import build_streams
    from livecam.core.types import RuntimeState

    streams = build_streams(config, pairs=pairs, identities=identities,
                            state=RuntimeState(active_identity="astro", identities=("astro",)),
                            hotkeys=False)
    base_mib = _gpu_reserved_mib(empty=True)
    _reset_gpu_peak()  # each run's own peak, not a run's before it in this process
    t0 = time.perf_counter()
    streams.start()  # opens the stages and captures their CUDA graphs before any output
    start_s = time.perf_counter() - t0
    start_mib = _gpu_reserved_mib() - base_mib
    # where the start went (livecam run logs it too): each part's slowest stream, ms
    open_ms = {key: max(a.open_timings_ms.get(key, 0.0) for a in streams.apps)
               for key in streams.apps[0].open_timings_ms}
    try:
        time.sleep(warm_s)
        before = [a.metrics.counters() for a in streams.apps]
        lat_before = [a.metrics.pipeline_latencies_ms()[0] for a in streams.apps]
        cpu_before = [a.metrics.cpu_ns() for a in streams.apps]
        process_cpu0 = time.process_time()
        t1 = time.perf_counter()
        # a profiler attached from outside starts on this line (`py-spy record --pid`)
        print(f"measuring for {window_s:.1f} s (started in {start_s:.1f} s)", flush=True)
        with GpuBusy() as busy:
            time.sleep(window_s)
        after = [a.metrics.counters() for a in streams.apps]
        t2 = time.perf_counter()
        process_cpu_s = time.process_time() - process_cpu0
        per_stream = []
        for app, c0, c1, n0, cpu0 in zip(streams.apps, before, after, lat_before, cpu_before,
                                          strict=True):
            d = {k: c1.get(k, 0) - c0.get(k, 0) for k in set(c0) | set(c1)}
            new = d.get("sent", 0) - d.get("repeated", 0)
            n1, pipe = app.metrics.pipeline_latencies_ms()
            keep = max(1, min(len(pipe), n1 - n0))
            sink = app.metrics.latencies_ms()[-max(1, min(1000, new)):]
            stages = {name: summary(times[-max(1, min(1000, d.get("processed", 0))):])
                      for name, times in app.metrics.stage_times_ms().items()}
            per_stream.append({
                "fps": new / (t2 - t1), "sent": d.get("sent", 0), "new": new,
                "late": d.get("repeated", 0) + sum(d.get(k, 0) for k in (
                    "dropped_capture", "dropped_pipeline", "dropped_output")),
                "stage_errors": d.get("stage_errors", 0),
                "capture_to_sink_ms": summary(sink),
                "capture_to_output_thread_ms": summary(pipe[-keep:]),
                # the stream's own threads' CPU time (Metrics.cpu_ns) per frame processed
                "host_cpu_ms_per_frame": ((app.metrics.cpu_ns() - cpu0) / 1e6
                                          / d["processed"] if d.get("processed") else None),
                "stages_ms": stages})
        profile = then(streams) if then is not None else None
        hub = _hub(streams)
        windows = list(hub.window_per_tick) if hub is not None else []
        return {"start_s": start_s, "profile": profile, "open_ms": open_ms,
                "window_s": t2 - t1,
                "streams": per_stream,
                # the whole process's CPU over the window, % of all the host's cores
                "host_cpu_percent": 100.0 * process_cpu_s / (t2 - t1) / (os.cpu_count() or 1),
                "gpu_peak_mib": _gpu_peak_mib(),
                # what the caching allocator still held from before this run, emptied, MiB
                "base_gpu_mib": None if math.isnan(base_mib) else base_mib,
                # nvidia-smi's utilization.gpu over the window, %: min, mean, max, samples
                "gpu_busy": busy.summary(),
                # page-locked host memory torch's caching host allocator holds (the capture's
                # frames with advanced.gpu.pinned_capture, the stages' staging), MiB: now and at
                # most
                "host_pinned_mib": _host_pinned_mib(),
                # the device memory the streams took at start (models, slots, graph pools)
                "start_gpu_mib": None if math.isnan(start_mib) else start_mib,
                # ticks pasted in a larger window than the smallest (a face close to the camera)
                "large_window_ticks": (sum(w > min(windows) for w in windows) / len(windows)
                                       if windows else None),
                "frames_per_tick": (float(np.mean(list(hub.frames_per_tick)))
                                    if hub is not None and hub.frames_per_tick else None),
                "graph_modes": sorted({m.split(" ")[0] for m in hub.graph_modes.values()})
                if hub is not None else [],
                "follower_batch": _follower_batch(streams),
                # the networks' batches that ended in the window: how many a second, their
                # mean ms, and the share of the window one ran (one runs at a time)
                "follower_batches": _batches_in(streams, t1, t2),
                "backend": streams.apps[0].describe()["backend"],
                "generator_mode": _generator_mode(hub)}
    finally:
        streams.stop()


def short_kernel_name(name: str) -> str:
    """A CUDA kernel's name without its namespaces and arguments, its template's functors
    and lambdas' functions kept (they tell PyTorch's elementwise kernels apart):
    ``elementwise_kernel<128, 4> [MulFunctor, launch_clamp_scalar]``."""
    if name.startswith(("Memcpy", "Memset")):
        return name
    for noise in ("void ", "at::native::", "(anonymous namespace)::", "c10::", "std::",
                  "at::cuda::detail::"):
        name = name.replace(noise, "")
    head = re.match(r"[\w:]+(?:<\d+(?:, ?\d+)*)?", name)
    parts = dict.fromkeys(re.findall(r"\w+Functor\w*|launch_\w+|\w+_kernel_cuda\w*",
                                     name[len(head.group(0)) if head else 0:]))
    base = (head.group(0) + (">" if "<" in head.group(0) else "")) if head else name[:60]
    return (base + (f" [{', '.join(list(parts)[:3])}]" if parts else ""))[:120]


def kernel_time(window_s: float, top: int = 40) -> dict[str, Any]:
    """The GPU kernels that ran in the next ``window_s`` seconds of this process (all its
    threads' launches and graph replays, through torch.profiler's CUPTI trace), as
    :func:`kernel_summary` gives them."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        return {"window_s": window_s, "kernel_ms": 0.0, "kernels": [],
                "error": "no CUDA device: no kernels to trace"}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        time.sleep(window_s)
    # the raw events, not prof.events(): that builds torch's event tree in Python, which
    # with 16 streams' threads holding the GIL took about 290 s for a 2 s trace
    spans = [(e.name(), e.device_resource_id(), e.start_ns(), e.end_ns())
             for e in prof.profiler.kineto_results.events()
             if e.device_type().name == "CUDA"]
    return kernel_summary(spans, window_s, top)


def kernel_summary(spans: list[tuple[str, int, int, int]], window_s: float,
                   top: int = 40) -> dict[str, Any]:
    """Kernels and copies (name, CUDA stream, start ns, end ns) summed: ``kernel_ms`` their
    summed time, ``busy_ms`` the time any of them ran (kernels of several CUDA streams
    overlap, so the sum can exceed the window while the GPU still idles between them), per
    kernel (:func:`short_kernel_name`) its count and ms, the ``top`` largest first, and per
    CUDA stream its ms, busy ms and largest three kernels (a stream is one part of the
    pipeline: a swap slot, the networks' batches, the tile search, a stream's uploads)."""
    by_raw: dict[str, list[float]] = {}
    per_stream: dict[int, list[tuple[int, int]]] = {}
    stream_raw: dict[int, dict[str, float]] = {}
    for raw, stream, start, end in spans:
        entry = by_raw.setdefault(raw, [0, 0.0])
        entry[0] += 1
        entry[1] += (end - start) / 1e6
        per_stream.setdefault(stream, []).append((start, end))
        names = stream_raw.setdefault(stream, {})
        names[raw] = names.get(raw, 0.0) + (end - start) / 1e6
    by_name: dict[str, list[float]] = {}
    for raw, (count, ms) in by_raw.items():
        entry = by_name.setdefault(short_kernel_name(raw), [0, 0.0])
        entry[0] += count
        entry[1] += ms
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
    streams = []
    for stream, intervals in per_stream.items():
        largest = sorted(stream_raw[stream].items(), key=lambda kv: -kv[1])[:3]
        streams.append({"stream": stream, "count": len(intervals),
                        "ms": sum(e - s for s, e in intervals) / 1e6,
                        "busy_ms": _union_ns(intervals) / 1e6,
                        "largest": [short_kernel_name(n) for n, _ in largest]})
    streams.sort(key=lambda row: -row["ms"])
    return {"window_s": window_s, "kernel_ms": sum(ms for _, ms in by_name.values()),
            "busy_ms": _union_ns([(s, e) for _, _, s, e in spans]) / 1e6,
            "kernels": [{"name": n, "count": int(c), "ms": ms} for n, (c, ms) in rows],
            "streams": streams}


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    """The length of the union of (start, end) intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


class GpuBusy:
    """The GPU's busy share (nvidia-smi's ``utilization.gpu``: the time any kernel ran, %)
    sampled every ``interval_ms`` while inside, so each run's window reports its own (the
    notes of runs 92-96 could only read one log for the whole call). ``summary()``: min,
    mean, max and the count of samples, or None where nvidia-smi is missing or gave none (a
    CPU machine). Reads the first GPU's value, the one the benchmark runs on."""

    def __init__(self, interval_ms: int = 200) -> None:
        self.interval_ms = interval_ms
        self.samples: list[float] = []
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> GpuBusy:
        try:
            self._proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                 f"-lms={self.interval_ms}", "--id=0"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:  # no nvidia-smi: no samples
            self._proc = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            out, _ = self._proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            out, _ = self._proc.communicate()
        for line in out.splitlines():
            try:
                self.samples.append(float(line.strip()))
            except ValueError:  # a line of text ("[N/A]", an error): not a sample
                continue

    def summary(self) -> dict[str, float] | None:
        if not self.samples:
            return None
        return {"min": min(self.samples), "mean": float(np.mean(self.samples)),
                "max": max(self.samples), "n": float(len(self.samples))}


def _host_pinned_mib() -> dict[str, float] | None:
    """The pinned host memory torch's caching host allocator holds, MiB (``current`` and
    ``peak`` of its ``allocated_bytes``: blocks in use and cached), or None without CUDA or
    without those statistics (torch before 2.7)."""
    import torch

    stats_of = getattr(torch.cuda, "host_memory_stats", None)
    if not torch.cuda.is_available() or stats_of is None:
        return None
    stats = stats_of()
    got = {k: stats.get(f"allocated_bytes.{k}") for k in ("current", "peak")}
    if any(v is None for v in got.values()):
        return None
    return {k: float(v) / 2**20 for k, v in got.items()}


def _reset_gpu_peak() -> None:
    """Start :func:`_gpu_peak_mib`'s count again (nothing off CUDA)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _gpu_peak_mib() -> float | None:
    """The most memory torch's caching allocator reserved since :func:`_reset_gpu_peak`, MiB
    (what a run left cached before it counts in, see ``base_gpu_mib``; None off CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_reserved() / 2**20


def _gpu_reserved_mib(*, empty: bool = False) -> float:
    """The CUDA caching allocator's reserved memory, MiB (first emptied of cached blocks with
    ``empty``); NaN without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return float("nan")
    torch.cuda.synchronize()
    if empty:
        torch.cuda.empty_cache()
    return torch.cuda.memory_reserved() / 2**20


def _generator_mode(hub: Any) -> str | None:
    """How the swap generator runs: compiled, CUDA graphs or eager (TorchEngine.mode)."""
    engine = getattr(getattr(hub, "generator", None), "engine", None)
    return getattr(engine, "mode", None)


def _batches_in(streams: Any, t1: float, t2: float) -> dict[str, float] | None:
    """The shared networks' batches that ended in [t1, t2] (``time.perf_counter``): per
    second, their mean ms, and the share of the window they ran (None: not shared)."""
    batcher = _batcher(streams)
    if batcher is None:
        return None
    spans = [(max(a, t1), b) for a, b in list(batcher.spans) if t1 <= b <= t2]
    ran = sum(b - a for a, b in spans)
    return {"per_s": len(spans) / (t2 - t1),
            "mean_ms": 1e3 * ran / len(spans) if spans else 0.0,
            "busy_share": ran / (t2 - t1)}


def _follower_batch(streams: Any) -> float | None:
    """Calls in each batch of the streams' shared follower networks (None: not shared)."""
    batcher = _batcher(streams)
    sizes = list(batcher.sizes) if batcher is not None else []
    return float(np.mean(sizes)) if sizes else None


def _batcher(streams: Any) -> Any:
    """The streams' shared follower networks' Batcher, or None (not shared)."""
    networks = getattr(getattr(streams.apps[0].stages[0], "follower", None), "networks", None)
    return getattr(getattr(networks, "shared", None), "batcher", None)


def _hub(streams: Any) -> Any:
    last = streams.apps[0].stages[-1]
    return getattr(last, "hub", None)


def naive_baseline(models_dir: str | None, onnx_path: Path, frame_bgr: np.ndarray,
                   frames: int) -> dict[str, Any]:
    """The naive baseline (eager fp32, blocking, one face at a time) on the same scene."""
    import torch

    from livecam.analysis.mesh import MIN_PRESENCE
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.build import build_program
    from livecam.gpupipe.networks.models import load_blazeface, load_face_mesh
    from tests.helpers.naive_baseline import NaiveBaseline

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    engine = TorchEngine(onnx_path, device=str(device), precision="fp32", cuda_graphs=False,
                         channels_last=False)
    engine.open()
    baseline = NaiveBaseline(detector=load_blazeface("full", models_dir=models_dir).to(device),
                             landmarker=load_face_mesh(models_dir=models_dir).to(device),
                             swapper=build_program(engine, device=device).swapper,
                             device=device, presence_threshold=MIN_PRESENCE)
    rng = np.random.default_rng(7)
    latents = rng.standard_normal((8, 512)).astype(np.float32)
    latents /= np.linalg.norm(latents, axis=1, keepdims=True)
    baseline.process(frame_bgr, latents)  # warm-up (cuDNN algorithm choice)
    times = []
    swapped = 0
    for _ in range(frames):
        t0 = time.perf_counter()
        _, swapped = baseline.process(frame_bgr, latents)
        times.append((time.perf_counter() - t0) * 1e3)
    engine.close()
    return {"ms": summary(times), "fps": 1e3 / float(np.mean(times)), "faces": swapped,
            "flops": _floor(onnx_path, device)}


def _floor(onnx_path: Path, device: Any) -> dict[str, float]:
    """Generator FLOPs per face (torch's counter on the eager fp32 executor) and the fp16
    matmul peak measured here: the arithmetic floor per face."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from livecam.engines.torch_engine import TorchEngine

    engine = TorchEngine(onnx_path, device=str(device), precision="fp32", cuda_graphs=False,
                         channels_last=False)
    engine.open()
    feeds = {}
    for spec in engine.inputs:
        shape = [1 if not isinstance(d, int) or d <= 0 else d for d in spec.shape]
        shape[0] = 1
        feeds[spec.name] = torch.rand(shape, device=device)
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        engine.run_torch(feeds)
    engine.close()
    flops = float(counter.get_total_flops())
    out = {"gflop_per_face": flops / 1e9, "ms_per_face_at_790_tflops": flops / 790e12 * 1e3}
    if device.type == "cuda":
        n = 8192
        a = torch.randn(n, n, device=device, dtype=torch.float16)
        b = torch.randn(n, n, device=device, dtype=torch.float16)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        tflops = 2 * n ** 3 * 20 / (time.perf_counter() - t0) / 1e12
        out["measured_fp16_tflops"] = tflops
        out["ms_per_face_at_measured_peak"] = flops / (tflops * 1e12) * 1e3
    return out


#: The picture-quality options of issue 13 as ``--set`` overrides; the enhancers are stand-ins
#: with each model's interface and crop (the real weights are downloads), so their rows time
#: the pipeline's own work around a small network, not the real restorers.
QUALITY_ENHANCERS = ("gpen_bfr_256", "gfpgan_1.4", "gpen_bfr_512", "codeformer")
QUALITY_SETTINGS: dict[str, tuple[str, ...]] = {
    "nothing": (),
    **{f"enhancer {name} (stand-in)": (f"swap.enhancer={name}",) for name in QUALITY_ENHANCERS},
    "pixel boost 256": ("advanced.swap.pixel_boost=256",),
    "pixel boost 512": ("advanced.swap.pixel_boost=512",),
    "hands in front, no hand in view": ("swap.hands_in_front=true",),
    "hands in front, a hand over the chin": ("swap.hands_in_front=true",),
}
QUALITY_MODES = {"offline": ("advanced.pipeline.realtime=false",), "live 30 fps": ()}


def why_no_hands() -> str:
    """Why hands in front cannot run here ("" when it can): it needs MediaPipe's hands
    solution (the ``mediapipe`` package), not only its ``.tflite`` files."""
    import importlib.util

    if importlib.util.find_spec("mediapipe") is None:
        return "mediapipe is not importable (hands in front runs mp.solutions.hands)"
    return ""


def quality_runs(setup: dict[str, Any], section: Any, *, warm_s: float, window_s: float,
                 hand_scene: Path | None, only: str = "") -> None:
    """``livecam run`` (as :func:`measure_run` builds it) on the one-face scene for each
    :data:`QUALITY_SETTINGS` entry whose label contains one of the comma-separated ``only``
    (empty: all), offline and at live 30 fps;
    ``section(name, fn)`` runs and records one (``fn`` raising records the error). The
    hand-over-the-chin row reads ``hand_scene`` (None: skipped, as are the hands rows where
    :func:`why_no_hands` says why)."""
    one = [(setup["inputs"][1], "null")]
    why_not = why_no_hands()
    for label, sets in QUALITY_SETTINGS.items():
        if not any(part in label for part in only.split(",")):
            continue
        pairs = one
        if "hand over" in label:
            why_not = why_not or ("" if hand_scene else "no scene with a hand (needs mediapipe "
                                                        "and the astronaut and t1 photos)")
            pairs = [(f"image:{hand_scene}", "null")]
        for mode, extra in QUALITY_MODES.items():
            name = f"{label}, {mode}"
            if "hands" in label and why_not:
                section(name, None, skipped=why_not)
                continue
            section(name, lambda p=pairs, s=(*sets, *extra): measure_run(
                setup["config"](*s), p, setup["identities"], warm_s=warm_s,
                window_s=window_s))


def print_quality_table(report: dict[str, Any]) -> None:
    """One row per run: frames per second, capture->sink latency, the GPU's time per frame
    (``swap.gpu``), hands on the host, the graph modes (were the options captured?)."""
    print(f"\n# livecam run, 1 face, {report.get('frame')}, {report.get('device')}, null output")
    print("| setting | mode | fps | capture->sink p50/p99 ms | late | swap.gpu p50 ms | "
          "hands p50/p99 ms | graphs | start s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, sec in report["sections"].items():
        label, mode = name.rsplit(", ", 1)
        if "streams" not in sec:
            print(f"| {label} | {mode} | {sec.get('skipped', '?')} |||||||")
            continue
        st = sec["streams"][0]
        stages = st["stages_ms"]
        print(f"| {label} | {mode} | {st['fps']:.1f} | "
              f"{st['capture_to_sink_ms']['p50']:.1f} / {st['capture_to_sink_ms']['p99']:.1f} | "
              f"{st['late']} | {stages.get('swap.gpu', {}).get('p50', float('nan')):.2f} | "
              f"{stages.get('swap.hands', {}).get('p50', float('nan')):.1f} / "
              f"{stages.get('swap.hands', {}).get('p99', float('nan')):.1f} | "
              f"{','.join(sec['graph_modes'])} | {sec['start_s']:.1f} |")
    for name, error in report["errors"].items():
        print(f"ERROR in {name}: {error}")

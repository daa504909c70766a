"""Measurements of the GPU benchmark through ``livecam run`` itself (see ``bench_gpu.py``).

Every run is built by :func:`livecam.app.build_streams`, the function ``livecam run`` and
``livecam daemon`` call, with ``--set``-style overrides only: the same stages, hub, threads,
mailboxes and output as a user's run. A run is started, left to warm up, measured over a
window from its own metrics (counters, latencies, stage times), and stopped.
"""

from __future__ import annotations

import hashlib
import logging
import time
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

    from livecam.analysis.gpu.facemesh import rois_from_detections
    from livecam.analysis.gpu.models import load_blazeface, load_face_mesh
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
                warm_s: float, window_s: float) -> dict[str, Any]:
    """Start ``livecam run``'s streams, warm up, measure a window, stop. Per stream: frames
    per second sent (new frames), capture→sink and capture→output-thread latency, each
    stage's time (``swap.gpu``: the swap's device time, upload to download), frames late
    (repeated by the output or dropped) in the window."""
    from livecam.app import build_streams
    from livecam.core.types import RuntimeState

    streams = build_streams(config, pairs=pairs, identities=identities,
                            state=RuntimeState(active_identity="astro", identities=("astro",)),
                            hotkeys=False)
    t0 = time.perf_counter()
    streams.start()  # opens the stages and captures their CUDA graphs before any output
    start_s = time.perf_counter() - t0
    try:
        time.sleep(warm_s)
        before = [a.metrics.counters() for a in streams.apps]
        lat_before = [a.metrics.pipeline_latencies_ms()[0] for a in streams.apps]
        t1 = time.perf_counter()
        time.sleep(window_s)
        after = [a.metrics.counters() for a in streams.apps]
        t2 = time.perf_counter()
        per_stream = []
        for app, c0, c1, n0 in zip(streams.apps, before, after, lat_before, strict=True):
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
                "stages_ms": stages})
        hub = _hub(streams)
        return {"start_s": start_s, "window_s": t2 - t1, "streams": per_stream,
                "frames_per_tick": (float(np.mean(list(hub.frames_per_tick)))
                                    if hub is not None and hub.frames_per_tick else None),
                "graph_modes": sorted({m.split(" ")[0] for m in hub.graph_modes.values()})
                if hub is not None else [],
                "backend": streams.apps[0].describe()["backend"]}
    finally:
        streams.stop()


def _hub(streams: Any) -> Any:
    last = streams.apps[0].stages[-1]
    return getattr(last, "hub", None)


def naive_baseline(models_dir: str | None, onnx_path: Path, frame_bgr: np.ndarray,
                   frames: int) -> dict[str, Any]:
    """The naive baseline (eager fp32, blocking, one face at a time) on the same scene."""
    import torch

    from livecam.analysis.gpu.models import load_blazeface, load_face_mesh
    from livecam.analysis.mesh import MIN_PRESENCE
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.baseline import NaiveBaseline
    from livecam.gpupipe.build import build_program

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

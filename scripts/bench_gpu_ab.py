"""A/B variants of the GPU pipeline in one short device call (companion of bench_gpu.py).

    python scripts/bench_gpu_ab.py --photos DIR --models-dir DIR [--work-dir DIR] [--out FILE]

- the generator alone (inswapper-sized stand-in, fp16, its own CUDA graph) with the
  instance-norm/AdaIN chains fused or run node by node, at batch 1 and 16: ms per call;
- the whole pipeline, 1 face at 1080p, for each of: generator inside the pipeline's swap graph
  ('graph') or replaying its own graph between pipeline graphs ('segmented'), with 2 or 3
  slots: latency p50/p99 (one tick in flight) and frames/s for one stream (ticks pipelined).

Prints a table and writes JSON. ``--work-dir`` lets bench_gpu.py reuse the stand-in it builds.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_gpu_scenes import build_scene, find_faces, load_photos


def time_engine(engine: Any, batch: int, reps: int) -> float:
    """Median ms per call of the engine's graph replay at ``batch`` (CUDA events)."""
    import torch

    feeds = {"target": torch.rand((batch, 3, 128, 128), device="cuda"),
             "source": torch.randn((batch, 512), device="cuda")}
    for _ in range(3):
        engine.run_torch(feeds)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        engine.run_torch(feeds)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    import torch

    from livecam.engines.torch_engine import TorchEngine
    from livecam.testing.standins import build_inswapper
    from scripts.bench_gpu_measure import run_latency, run_throughput
    from scripts.bench_gpu_run import _modules, _scheduler

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, default=None)
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench_gpu_ab.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="livecam_ab_"))
    work.mkdir(parents=True, exist_ok=True)
    onnx_path = work / "inswapper_standin_full.onnx"
    if not onnx_path.exists():
        build_inswapper(onnx_path, size="full", batch="N")
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "generator": {},
                              "pipeline": {}}
    engines = {}
    for fuse in (False, True):
        engine = TorchEngine(onnx_path, device="cuda", precision="fp16", cuda_graphs=True,
                             fuse=fuse)
        engine.open()
        gen = {f"b{b}_ms": time_engine(engine, b, 50) for b in (1, 16)}
        report["generator"][f"fuse={fuse}"] = gen
        print(f"generator fp16 own graph, fuse={fuse}: {gen}", flush=True)
        engines[fuse] = engine
    del engines[False]
    torch.cuda.empty_cache()
    plain = TorchEngine(onnx_path, device="cuda", precision="fp16", cuda_graphs=False)
    plain.open()
    photos = load_photos(args.photos)
    from livecam.analysis.gpu.models import load_blazeface

    device = torch.device("cuda")
    faces = find_faces(load_blazeface("full", models_dir=args.models_dir).to(device), photos,
                       device)
    scene = build_scene(faces, 1, 1080, 1920)
    rng = np.random.default_rng(7)
    latents = rng.standard_normal((4, 512)).astype(np.float32)
    latents /= np.linalg.norm(latents, axis=1, keepdims=True)
    for engine_graphs, engine in ((True, engines[True]), (False, plain)):
        for slots in (2, 3):
            ns = argparse.Namespace(models_dir=args.models_dir, slots=slots, no_graphs=False,
                                    detect_every=5)
            modules = _modules(engine, device, "fp16", ns, 640)
            t0 = time.perf_counter()
            with _scheduler(modules, scene, 1080, 1920, ns) as sched:
                modes = sched.warmup((1,))
                capture_s = time.perf_counter() - t0
                lat = run_latency(sched, scene, latents, 150)
                thr = run_throughput(sched, scene, latents, 400)
            key = f"engine_graphs={engine_graphs} slots={slots}"
            row: dict[str, Any] = {"modes": sorted(set(m.split(" ")[0] for m in modes.values())),
                   "capture_s": capture_s,
                   "latency_p50_ms": lat["host_latency_ms"]["p50"],
                   "latency_p99_ms": lat["host_latency_ms"]["p99"],
                   "gpu_latency_p50_ms": lat["gpu_latency_ms"]["p50"],
                   "fps": thr["frames_per_s"],
                   "allocations_per_tick": thr["device_allocations_per_tick"]}
            report["pipeline"][key] = row
            print(f"{key}: {row}", flush=True)
            args.out.write_text(json.dumps(report, indent=2))
    print("\n| variant | modes | p50 ms | p99 ms | fps |\n|---|---|---|---|---|")
    for key, row in report["pipeline"].items():
        print(f"| {key} | {row['modes']} | {row['latency_p50_ms']:.2f} | "
              f"{row['latency_p99_ms']:.2f} | {row['fps']:.0f} |")
    args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

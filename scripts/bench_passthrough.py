#!/usr/bin/env python
"""Framework overhead of the live pipeline: 1080p30 synthetic input, no-op stage, null output.

Prints a table and writes JSON. "Overhead" is the process's CPU time per output frame (all
threads: capture hand-off, pipeline thread, output pacing, metrics) with the pattern frames
pre-rendered, so nothing but the framework is measured. Latency is capture → sink hand-off.

    python -m scripts.bench_passthrough [--seconds 20] [--json out/bench_passthrough.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from livecam.app import App
from livecam.capture.sources import SyntheticSource
from livecam.config import load_config
from livecam.output.sinks import NullSink
from livecam.pipeline.passthrough import PassThrough


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--json", type=Path, default=Path("out/bench_passthrough.json"))
    args = parser.parse_args()

    config = load_config(None, ["advanced.pipeline.status_interval_s=0", f"capture.fps={args.fps}"])
    source = SyntheticSource(width=args.width, height=args.height, fps=args.fps)
    for _ in range(30):  # pre-render the pattern so the run measures only the framework
        source.read()
    app = App(config, source=source, sink=NullSink(), stages=[PassThrough()])
    app.start()
    time.sleep(1.0)  # warm-up
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sent0 = app.metrics.counter("sent")
    n_lat0 = len(app.metrics.latencies_ms())
    time.sleep(args.seconds)
    cpu1, wall1 = time.process_time(), time.perf_counter()
    sent1 = app.metrics.counter("sent")
    latencies = np.array(app.metrics.latencies_ms())
    app.stop()
    # the latency ring holds the last 1000 samples: take those from the measured window
    measured = latencies[-min(len(latencies), max(1, len(latencies) - n_lat0)):]
    frames = sent1 - sent0
    result = {
        "resolution": f"{args.width}x{args.height}",
        "fps_target": args.fps,
        "seconds": round(wall1 - wall0, 2),
        "frames_out": frames,
        "fps_out": round(frames / (wall1 - wall0), 2),
        "overhead_cpu_ms_per_frame": round(1000 * (cpu1 - cpu0) / max(frames, 1), 3),
        "latency_p50_ms": round(float(np.percentile(measured, 50)), 3),
        "latency_p99_ms": round(float(np.percentile(measured, 99)), 3),
        "latency_max_ms": round(float(measured.max()), 3),
        "dropped_capture": app.metrics.counter("dropped_capture"),
        "dropped_output": app.metrics.counter("dropped_output"),
        "repeated": app.metrics.counter("repeated"),
        "goal_overhead_ms": 2.0,
        "goal_latency_p99_ms": round(1000 / args.fps + 5, 2),
        "machine": f"{platform.machine()} cpus={os.cpu_count()}",
    }
    print(f"{'metric':<28}{'value':>12}")
    for key in ("resolution", "fps_out", "frames_out", "overhead_cpu_ms_per_frame",
                "latency_p50_ms", "latency_p99_ms", "latency_max_ms", "dropped_capture",
                "dropped_output", "repeated", "goal_overhead_ms", "goal_latency_p99_ms"):
        print(f"{key:<28}{result[key]!s:>12}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

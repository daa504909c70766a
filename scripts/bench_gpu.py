"""GPU pipeline benchmark (issue 6): one command on the device machine.

    python scripts/bench_gpu.py --photos DIR --models-dir DIR [--quick] [--out FILE]
    python scripts/bench_gpu.py --device cpu --small          # quick check on a CPU

Synthetic 1080p frames with real face photos composited in (``--photos``: a folder of
.png/.jpg; ``--models-dir``: a copy of mediapipe/modules with the face .tflite files), 1 and
4 faces, neural swap with an inswapper-SIZED stand-in (138 M parameters, random weights, built
here). Measures, all in this one run:

- latency p50/p99 from upload queued to swapped frame in host memory (one tick in flight);
- frames per second for one stream (ticks pipelined over the slot ring);
- per-stage GPU times (each stage captured as its own CUDA graph, replayed back to back with
  CUDA events between; an eager run's breakdown too, which includes Python dispatch);
- the largest number of concurrent 1080p30 streams (one face each, faces of all streams in one
  generator call) whose p99 latency stays <= 33 ms when paced at 30 ticks/s;
- the same workload through a naive baseline (eager fp32, synchronous, one face at a time);
- the arithmetic floor: generator FLOPs per face / fp16 matmul peak measured here.

Prints a table and writes JSON. Frames are pre-staged in the slots' pinned buffers (the capture
thread's job in the app); the classic swap has no GPU port yet and is not measured.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_gpu_scenes import load_photos


def main(argv: list[str] | None = None) -> int:
    from scripts.bench_gpu_run import run_benchmark

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--small", action="store_true",
                        help="small stand-in model and 640x360 frames (a quick CPU check)")
    parser.add_argument("--quick", action="store_true", help="fewer ticks everywhere")
    parser.add_argument("--photos", type=Path, default=None,
                        help="folder of real face photos (.png/.jpg); default: the photos of "
                             "installed packages (skimage, insightface) where present")
    parser.add_argument("--models-dir", type=Path, default=None,
                        help="copy of mediapipe/modules (face_detection/, face_landmark/ "
                             ".tflite); default: the installed mediapipe")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the stand-in ONNX is built (default: a temp dir)")
    parser.add_argument("--slots", type=int, default=3,
                        help="slot ring size (>= 2; with 3, 438 fps vs 376 with 2: perf notes "
                             "device run 4)")
    parser.add_argument("--detect-every", type=int, default=5,
                        help="run the detector every N ticks, as the CPU analysis stage's "
                             "default (faces are followed from their landmarks in between); "
                             "the baseline does the same")
    parser.add_argument("--no-graphs", action="store_true", help="never capture CUDA graphs")
    parser.add_argument("--engine-graphs", action="store_true",
                        help="the generator engine replays its own CUDA graph between two "
                             "pipeline graphs ('segmented'); default: the generator is captured "
                             "inside the pipeline's swap graph ('graph'), so ticks' generators "
                             "can overlap")
    parser.add_argument("--max-streams", type=int, default=64,
                        help="largest stream count the concurrency search tries")
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="skip the remaining measurements after this many seconds")
    parser.add_argument("--out", type=Path, default=Path("bench_gpu.json"), help="JSON output")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    photos = load_photos(args.photos)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="livecam_bench_"))
    host = {"python": platform.python_version(), "machine": platform.machine()}

    def save(report: dict[str, Any]) -> None:  # after every section: a timeout keeps results
        args.out.write_text(json.dumps({**report, "host": host}, indent=2, default=float))

    report = run_benchmark(args, photos, work, save)
    save(report)
    print_table(report)
    print(f"\nwrote {args.out}")
    return 0


def print_table(report: dict[str, Any]) -> None:
    print(f"\n# GPU pipeline benchmark ({report['device']}, {report['frame']}, "
          f"{report['model']['parameters'] / 1e6:.1f} M-param generator)")
    print("| faces | mode | latency p50 / p99 ms (host) | GPU p50 ms | fps (1 stream) | "
          "baseline p50 ms | baseline fps | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for name, error in report.get("errors", {}).items():
        print(f"ERROR in {name}: {error}")
    for key, row in report["workloads"].items():
        lat = row["latency"]["host_latency_ms"]
        base = row.get("baseline", {})
        speed = row.get("speedup_vs_baseline", float("nan"))
        print(f"| {key} | {row['modes']} | {lat['p50']:.2f} / {lat['p99']:.2f} | "
              f"{row['latency']['gpu_latency_ms']['p50']:.2f} | "
              f"{row['throughput']['frames_per_s']:.1f} | "
              f"{base.get('latency_ms', {}).get('p50', float('nan')):.1f} | "
              f"{base.get('frames_per_s', float('nan')):.1f} | {speed:.1f}x |")
    print("\nper-stage ms (graphs: each stage its own CUDA graph, replayed back to back with "
          "CUDA events between, median; eager: an eager run):")
    for key, row in report["workloads"].items():
        stages = ", ".join(f"{k} {v:.3f}" for k, v in row["stages_ms"].items())
        print(f"  {key} [{row.get('stages_source', '?')}]: {stages}")
    print("per-stage ms of an eager run (includes Python dispatch gaps):")
    for key, row in report["workloads"].items():
        stages = ", ".join(f"{k} {v:.3f}" for k, v in row.get("stages_eager_ms", {}).items())
        print(f"  {key}: {stages}")
    parity = report.get("parity_1_face", {})
    if parity:
        print(f"\nparity, pipeline vs naive fp32 (1 face): landmarks mean "
              f"{parity['landmarks_mean_px']:.3f} px, frame mean |diff| "
              f"{parity['frame_mean_abs']:.3f}, max {parity['frame_max_abs']}, "
              f">3 levels {parity['frame_frac_over_3'] * 100:.3f}% of values")
        if "swap_maths_vs_cpu_mean_abs" in parity:
            print(f"swap maths on this device vs the CPU code (OpenCV), fp32: mean |diff| "
                  f"{parity['swap_maths_vs_cpu_mean_abs']:.3f}, max "
                  f"{parity['swap_maths_vs_cpu_max_abs']}, >3 levels "
                  f"{parity['swap_maths_vs_cpu_frac_over_3'] * 100:.3f}% of values")
    streams = report.get("streams", {})
    print(f"\nconcurrent 1080p30 streams holding p99 <= 33 ms: {streams.get('max_streams')} "
          f"(tried: {streams.get('tried')})")
    floor = report.get("floor", {})
    at_peak = floor.get("ms_per_face_at_measured_peak", float("nan"))
    peak = floor.get("measured_fp16_tflops", float("nan"))
    print(f"arithmetic floor per face: {at_peak:.3f} ms at {peak:.0f} TFLOP/s measured "
          f"({floor.get('gflop_per_face', float('nan')):.0f} GFLOP/face); "
          f"{floor.get('ms_per_face_at_790_tflops', float('nan')):.3f} ms at 790 TFLOP/s")
    goals = report.get("goals", {})
    if goals:
        print("\ngoals (neural, 1 face, 1080p):")
        for name, g in goals.items():
            print(f"  {name}: {g['value']:.2f} (goal {g['goal']}) -> "
                  f"{'met' if g['met'] else 'NOT met'}")


if __name__ == "__main__":
    raise SystemExit(main())

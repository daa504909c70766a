"""GPU benchmark of the product: ``livecam run`` itself, on the device machine (issue 12).

    python -m scripts.bench_gpu --photos DIR --models-dir DIR --out FILE [--work-dir DIR]
    python -m scripts.bench_gpu --small --out /tmp/b.json      # a quick check on a CPU

Real face photos (``--photos``: a folder of .png/.jpg) composited into 1080p scenes, each
swaying a few pixels in a short raw video that ``livecam run`` reads as a looped ``file:``
input (a new frame every time, as from a camera; ``--input image`` reads the still scene as an
``image:`` input instead, whose repeated array the GPU follower uploads and searches once),
output ``null``; neural swap with an inswapper-SIZED stand-in generator (138 M parameters, random
weights, installed like a downloaded model) and a library identity. Every run is built by the
function ``livecam run`` calls (``build_streams``) with ``--set`` overrides only, and measured
from its own metrics over a window after a warm-up:

- one stream, offline (``advanced.pipeline.realtime: false``): frames per second;
- one stream, live at 30 fps: capture→sink and capture→output latency, each stage's time
  (``analysis``: the face follower with its networks on the GPU; ``swap.gpu``: the swap's
  device time from upload to download);
- N live 1080p30 streams in one process (one face each): each stream's p99 and frames late
  (repeated by the output or dropped), for N in ``--streams``;
- 4 faces, offline;
- the naive baseline (eager fp32, blocking, one face at a time) on the same scene, and the
  arithmetic floor (generator FLOPs per face / fp16 matmul peak measured here);
- with ``--compile``: ``livecam engines build`` (as a subprocess) and the one-stream runs again
  with ``advanced.engine.torch_mode: compiled``.

Prints a table and writes JSON (rewritten after every section, so a time-out keeps what was
measured). ``--models-dir``: a copy of mediapipe/modules
(``scripts/device/export_bench_assets.py``).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from scripts.bench_gpu_product import measure_run, naive_baseline
from scripts.gpu_harness import STREAM_P99_MS, add_options, engines_build, prepare, start

log = logging.getLogger("bench_gpu")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_options(parser, streams="8,16,32", budget_s=420.0, out="bench_gpu.json")
    parser.add_argument("--keep-going", action="store_true",
                        help="try every stream count, even after one was not held (else it "
                             "stops at the first miss)")
    parser.add_argument("--compile", choices=("none", "fast", "autotune"), default="none",
                        help="build the compiled generator (batch 1) and measure it too")
    parser.add_argument("--compile-batches", default="1",
                        help="with --compile: the batch sizes to compile, comma-separated (a "
                             "tick of several streams' faces runs the next one up)")
    parser.add_argument("--compile-first", action="store_true",
                        help="with --compile: build first, so every run uses the compiled "
                             "generator (advanced.engine.torch_mode auto finds it)")
    parser.add_argument("--only", default="",
                        help="run only the sections whose names contain one of these "
                             "comma-separated words (e.g. 'compile')")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    work, report, save = start(args, results="sections")

    wanted = [w for w in args.only.split(",") if w]

    def section(name: str, fn: Any) -> None:
        if wanted and not any(w in name for w in wanted):
            return
        if time.perf_counter() - t_start > args.budget_s:
            report["errors"][name] = f"skipped: over the {args.budget_s:.0f} s budget"
            save()
            return
        t0 = time.perf_counter()
        try:
            report["sections"][name] = fn()
        except Exception as exc:  # keep what was measured; say what broke
            log.exception("%s failed", name)
            report["errors"][name] = f"{type(exc).__name__}: {exc}"[:600]
        log.info("%s: %.1f s", name, time.perf_counter() - t0)
        save()

    setup = prepare(args, work, report)
    save()
    one = [(setup["inputs"][1], "null")]
    four = [(setup["inputs"][4], "null")]
    win = {"warm_s": args.warm_s, "window_s": args.window_s}

    def run(pairs: list[tuple[str, str]], *overrides: str) -> dict[str, Any]:
        return measure_run(setup["config"](*overrides), pairs, setup["identities"], **win)

    if args.engines_build:
        height, width = setup["frames"][1].shape[:2]
        section("engines build", lambda: engines_build(setup["base"], "--size",
                                                       f"{width}x{height}"))
    if args.compile != "none" and args.compile_first:
        section("compile", lambda: build_compiled(setup, args.compile, args.compile_batches))
    section("1 face offline", lambda: run(one, "advanced.pipeline.realtime=false"))
    section("1 face live 30 fps", lambda: run(one))
    section("naive baseline", lambda: naive_baseline(
        args.models_dir, setup["onnx"], setup["frames"][1], 10 if args.small else 40))
    for n in [int(x) for x in args.streams.split(",") if x]:
        name = f"{n} streams live 30 fps"
        section(name, lambda n=n: run(one * n, "analysis.max_faces=1"))
        got = report["sections"].get(name)
        if got is None or (not _held(got) and not args.keep_going):
            break
    section("4 faces offline", lambda: run(four, "advanced.pipeline.realtime=false"))
    if args.compile != "none" and not args.compile_first:
        section("compile", lambda: build_compiled(setup, args.compile, args.compile_batches))
        if "compile" in report["sections"]:
            compiled = ("advanced.engine.torch_mode=compiled",)
            section("1 face offline, compiled",
                    lambda: run(one, "advanced.pipeline.realtime=false", *compiled))
            section("1 face live 30 fps, compiled", lambda: run(one, *compiled))
    report["wall_s"] = time.perf_counter() - t_start
    report["goals"] = goals(report)
    save()
    print_table(report)
    print(f"\nwrote {args.out}")
    return 0


def _held(section: dict[str, Any]) -> bool:
    return all(st["capture_to_sink_ms"]["p99"] <= STREAM_P99_MS and st["late"] == 0
               for st in section["streams"])


def build_compiled(setup: dict[str, Any], mode: str, batches: str = "1") -> dict[str, Any]:
    """``livecam engines build inswapper_128`` for the comma-separated ``batches`` as a
    subprocess, as a user runs it."""
    autotune = f"advanced.engine.compile_max_autotune={'true' if mode == 'autotune' else 'false'}"
    sizes = ("advanced.engine.compiled_batch_sizes="
             f"[{','.join(b.strip() for b in batches.split(','))}]")
    built = engines_build([*setup["base"], "advanced.engine.torch_mode=compiled", sizes, autotune])
    setup["base"].extend([sizes, autotune])
    return {**built, "mode": mode, "batches": sizes}


def goals(report: dict[str, Any]) -> dict[str, Any]:
    s = report["sections"]
    out: dict[str, Any] = {}

    def first(name: str) -> dict[str, Any] | None:
        got = s.get(name)
        return got["streams"][0] if got else None

    live = first("1 face live 30 fps")
    if live is not None:
        gpu = live["stages_ms"].get("swap.gpu", {})
        analysis = live["stages_ms"].get("analysis", {})
        out["swap GPU latency p50 ms (<= 2.5)"] = gpu.get("p50")
        out["swap GPU latency p99 ms (<= 4)"] = gpu.get("p99")
        out["analysis stage p50 ms (host + GPU networks)"] = analysis.get("p50")
        out["capture->sink p99 ms (<= 33.3 + 5)"] = live["capture_to_sink_ms"]["p99"]
    off = first("1 face offline")
    if off is not None:
        out["1 stream offline fps (>= 500)"] = off["fps"]
        base = s.get("naive baseline")
        if base:
            out["x naive baseline (>= 25)"] = off["fps"] / base["fps"]
    held = [int(k.split()[0]) for k, v in s.items() if k.endswith("streams live 30 fps")
            and _held(v)]
    out[f"1080p30 streams held, capture->sink p99 <= {STREAM_P99_MS:.1f} ms, 0 late (>= 32)"] \
        = max(held) if held else 0
    return out


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _busy(value: dict[str, float] | None) -> str:
    """The window's GPU busy share, "mean (min-max)" %, or "-" without samples."""
    if not value:
        return "-"
    return f"{value['mean']:.0f} ({value['min']:.0f}-{value['max']:.0f})"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def print_table(report: dict[str, Any]) -> None:
    print(f"\n# livecam run on {report.get('device')} ({report.get('frame')}, "
          f"{report.get('model', {}).get('parameters', 0) / 1e6:.1f} M-param generator)")
    for name, error in report["errors"].items():
        print(f"ERROR in {name}: {error}")
    print("| run | fps/stream | capture->sink p50/p99 ms | late | analysis p50 | "
          "swap.gpu p50/p99 | GPU busy % | start s | GPU MiB at start | pinned host MiB | "
          "frames/tick | follower batch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, sec in report["sections"].items():
        if "streams" not in sec:
            continue
        st = sec["streams"]
        worst = max(st, key=lambda x: x["capture_to_sink_ms"]["p99"])
        gpu = worst["stages_ms"].get("swap.gpu", {})
        print(f"| {name} | {min(x['fps'] for x in st):.1f} | "
              f"{worst['capture_to_sink_ms']['p50']:.1f} / "
              f"{worst['capture_to_sink_ms']['p99']:.1f} | {sum(x['late'] for x in st)} | "
              f"{worst['stages_ms'].get('analysis', {}).get('p50', float('nan')):.2f} | "
              f"{gpu.get('p50', float('nan')):.2f} / {gpu.get('p99', float('nan')):.2f} | "
              f"{_busy(sec.get('gpu_busy'))} | {sec['start_s']:.1f} | "
              f"{_mib(sec.get('start_gpu_mib'))} | "
              f"{_mib((sec.get('host_pinned_mib') or {}).get('peak'))} | "
              f"{_mean(sec.get('frames_per_tick'))} | "
              f"{_mean(sec.get('follower_batch'))} |")
    base = report["sections"].get("naive baseline")
    if base:
        floor = base["flops"]
        print(f"\nnaive baseline: {base['fps']:.1f} fps ({base['ms']['p50']:.1f} ms/frame); "
              f"floor {floor.get('ms_per_face_at_measured_peak', float('nan')):.3f} ms/face at "
              f"{floor.get('measured_fp16_tflops', float('nan')):.0f} TFLOP/s "
              f"({floor['gflop_per_face']:.0f} GFLOP/face)")
    print("\ngoals:")
    for name, value in report.get("goals", {}).items():
        print(f"  {name}: {value}")


if __name__ == "__main__":
    raise SystemExit(main())

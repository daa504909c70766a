"""Many streams in one process (issue 41): ``livecam run`` with N input/output pairs and
``livecam daemon`` with a ``streams:`` list, each N measured from the streams' own metrics.

    python -m scripts.bench_streams --small --streams 1,2 --out /tmp/s.json   # CPU check
    python -m scripts.bench_streams --photos DIR --models-dir DIR --streams 1,4,8,16,32 \\
        --engines-build --out $OUT/bench_streams.json                           # the H200

The scenes, stand-in models (the inswapper-sized generator), identity and config are
``scripts/gpu_harness.py``'s (``prepare``); each run is built by what the command builds
(``build_streams`` with the ``--input``/``--output`` pairs of ``livecam run``, or with the
pairs ``livecam daemon`` reads from ``streams:``: ``stream_pairs``) and measured by
``measure_run`` (live at 30 fps, one face per stream, null output). Per N: each stream's fps,
late frames, capture->sink p50/p99 and host CPU ms per frame (its own threads), the whole
process's host CPU % of all cores, the GPU memory at start and at peak, the start time, and
what the start compiled (the log's warning of :mod:`livecam.gpupipe.prepared`). With
``--engines-build``, ``livecam engines build`` runs first (as a user prepares a machine).
Prints a table and writes JSON after every run.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from scripts.bench_gpu_product import kernel_time, measure_run
from scripts.gpu_harness import STREAM_P99_MS, add_options, engines_build, prepare, start

log = logging.getLogger("bench_streams")


class _Compiles(logging.Handler):
    """Keeps livecam's lines that say a start compiles (or that nothing compiles)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def daemon_pairs(config: Any) -> list[tuple[str, str]]:
    """The streams ``livecam daemon`` starts for ``config`` (its ``streams:`` list)."""
    from livecam.subcommands.run import stream_pairs

    return stream_pairs(argparse.Namespace(input=None, output=None), config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_options(parser, streams="1,4,8,16", budget_s=480.0, out="bench_streams.json")
    parser.add_argument("--commands", default="run,daemon",
                        help="run (N --input/--output pairs), daemon (streams:), or both")
    parser.add_argument("--kernel-window-s", type=float, default=0.0,
                        help="after each window, trace the GPU's kernels this long and print "
                             "where the GPU time went (torch.profiler)")
    args = parser.parse_args(argv)
    if args.small:
        args.window_s, args.warm_s = min(args.window_s, 3.0), min(args.warm_s, 1.0)
    t_start = time.perf_counter()
    work, report, save = start(args, results="runs")
    compiles = _Compiles()
    prepared_log = logging.getLogger("livecam.gpupipe.prepared")
    prepared_log.setLevel(logging.INFO)
    prepared_log.addHandler(compiles)

    setup = prepare(args, work, report)
    save()
    clip = setup["inputs"][1]
    if args.engines_build:
        height, width = setup["frames"][1].shape[:2]
        try:
            report["engines_build"] = engines_build(setup["base"], "--size", f"{width}x{height}")
        except Exception as exc:  # keep going: the runs then say what they compile
            report["errors"]["engines build"] = f"{type(exc).__name__}: {exc}"[:600]
        save()
    kernel_s = args.kernel_window_s
    then = (lambda _streams: kernel_time(kernel_s)) if kernel_s > 0 else None
    for n in [int(x) for x in args.streams.split(",") if x]:
        for command in [c for c in args.commands.split(",") if c]:
            name = f"livecam {command}, {n} stream(s)"
            if time.perf_counter() - t_start > args.budget_s:
                report["errors"][name] = f"skipped: over the {args.budget_s:.0f} s budget"
                continue
            overrides = ["analysis.max_faces=1"]
            if command == "daemon":
                entries = ", ".join(f"{{input: '{clip}', output: 'null'}}" for _ in range(n))
                config = setup["config"](*overrides, f"streams=[{entries}]")
                pairs = daemon_pairs(config)
            else:
                config = setup["config"](*overrides)
                pairs = [(clip, "null")] * n
            compiles.lines.clear()
            try:
                got = measure_run(config, pairs, setup["identities"], warm_s=args.warm_s,
                                  window_s=args.window_s, then=then)
                got["compile_notice"] = list(compiles.lines)
                report["runs"][name] = got
            except Exception as exc:  # a refused start (memory plan) or a failure: say it
                log.exception("%s failed", name)
                report["errors"][name] = f"{type(exc).__name__}: {exc}"[:600]
            save()
    report["wall_s"] = time.perf_counter() - t_start
    save()
    print_table(report)
    print(f"\nwrote {args.out}")
    return 0


def _f(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None or value != value else format(value, fmt)


def print_table(report: dict[str, Any]) -> None:
    print(f"\n# many streams on {report.get('device')} ({report.get('frame')}, "
          f"{report.get('model', {}).get('parameters', 0) / 1e6:.1f} M-param generator)")
    for name, error in report["errors"].items():
        print(f"ERROR in {name}: {error}")
    print("| run | fps/stream min-max | late | capture->sink p50 / p99 ms (worst) | "
          "host CPU ms/frame/stream | host CPU % | GPU MiB start / peak | start s | "
          f"held (p99 <= {STREAM_P99_MS:.1f}, 0 late) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, run in report["runs"].items():
        st = run["streams"]
        worst = max(st, key=lambda x: x["capture_to_sink_ms"]["p99"])
        cpu = [x["host_cpu_ms_per_frame"] for x in st if x.get("host_cpu_ms_per_frame")]
        held = all(x["capture_to_sink_ms"]["p99"] <= STREAM_P99_MS and x["late"] == 0
                   for x in st)
        print(f"| {name} | {min(x['fps'] for x in st):.1f}-{max(x['fps'] for x in st):.1f} | "
              f"{sum(x['late'] for x in st)} | {worst['capture_to_sink_ms']['p50']:.1f} / "
              f"{worst['capture_to_sink_ms']['p99']:.1f} | "
              f"{_f(sum(cpu) / len(cpu) if cpu else None, '.2f')} | "
              f"{_f(run.get('host_cpu_percent'))} | {_f(run.get('start_gpu_mib'), '.0f')} / "
              f"{_f(run.get('gpu_peak_mib'), '.0f')} | {run['start_s']:.1f} | "
              f"{'yes' if held else 'no'} |")
    for name, run in report["runs"].items():
        for line in run.get("compile_notice", []):
            print(f"{name}: {line}")
        print(f"{name}: start {run['start_s']:.1f} s, its parts (slowest stream, ms): "
              + ", ".join(f"{k} {v:.0f}" for k, v in run.get("open_ms", {}).items()))
        batches = run.get("follower_batches")
        if batches:
            print(f"{name}: the networks' batches: {batches['per_s']:.1f} a second, "
                  f"{batches['mean_ms']:.1f} ms each, running {100 * batches['busy_share']:.0f} "
                  f"% of the window, {run.get('follower_batch') or 0:.1f} calls each")
        kernels = run.get("profile")
        if kernels and kernels.get("error"):
            print(f"{name}: GPU kernels: {kernels['error']}")
        elif kernels:
            print(f"{name}: GPU kernels over {kernels['window_s']:.1f} s: "
                  f"{kernels['kernel_ms']:.0f} ms, some kernel running "
                  f"{kernels.get('busy_ms', 0.0):.0f} ms")
            print("| kernel | count | ms | % |\n|---|---|---|---|")
            for k in kernels["kernels"]:
                print(f"| {k['name']} | {k['count']} | {k['ms']:.1f} | "
                      f"{100 * k['ms'] / max(kernels['kernel_ms'], 1e-9):.1f} |")
            print("| CUDA stream | kernels | ms | busy ms | largest |\n|---|---|---|---|---|")
            for row in kernels.get("streams", []):
                print(f"| {row['stream']} | {row['count']} | {row['ms']:.1f} | "
                      f"{row['busy_ms']:.1f} | {'; '.join(row['largest'])} |")


if __name__ == "__main__":
    raise SystemExit(main())

"""One client stream of ``scripts/bench_triton.py``: ``livecam run`` for a while, then its numbers.

Builds the app exactly as ``livecam run`` does (``build_from_args`` on the real parser) from the
``livecam run`` arguments given after ``--``, runs it for ``--seconds`` after ``--warmup-s``,
and prints one JSON line: capture->sink latency p50/p99 of the frames sent after the warm-up,
fps, dropped/repeated frames, per-stage p50, and the remote engine's link state (requests,
request p50/p99, bytes, rows, requests in flight at most) when the swap runs on Triton.

With ``--wait-go`` it prints ``ready`` once the app runs and waits for a line on stdin before
its warm-up, so that ``bench_triton.py`` measures N streams over the same window (32
processes take seconds to start one after the other).

    python -m scripts.bench_triton_stream --seconds 20 -- --input image:scene.png ...
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--wait-go", action="store_true",
                        help="print 'ready' once running, then wait for a line on stdin")
    parser.add_argument("run_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    run_args = [a for a in args.run_args if a != "--"]

    import numpy as np

    from livecam.cli import build_parser
    from livecam.subcommands.common import config_from_args
    from livecam.subcommands.run import build_from_args

    run_ns = build_parser().parse_args(["run", *run_args])
    streams = build_from_args(run_ns, config_from_args(run_ns), daemon=False)
    app = streams.apps[0]  # one --input/--output pair: one stream
    t_open = time.perf_counter()
    streams.start()
    open_s = time.perf_counter() - t_open
    try:
        if args.wait_go:
            print("ready", flush=True)
            sys.stdin.readline()
        time.sleep(args.warmup_s)
        m = app.metrics
        sent0, captured0 = m.counter("sent"), m.counter("captured")
        processed0 = m.counter("processed")
        dropped0 = m.counter("dropped_capture") + m.counter("dropped_output")
        health0 = (app.describe().get("remote_engines") or {}).get("swap") or {}
        t0 = time.perf_counter()
        time.sleep(args.seconds)
        elapsed = time.perf_counter() - t0
        sent = m.counter("sent") - sent0
        latencies = m.latencies_ms()[-max(sent, 1):]
        health = (app.describe().get("remote_engines") or {}).get("swap") or {}
        stages = {k: float(np.percentile(v, 50)) for k, v in m.stage_times_ms().items() if v}
        doc = {
            "open_s": round(open_s, 2),
            "seconds": round(elapsed, 2),
            "fps_out": round(sent / elapsed, 2),
            "fps_processed": round((m.counter("processed") - processed0) / elapsed, 2),
            "fps_in": round((m.counter("captured") - captured0) / elapsed, 2),
            "dropped": m.counter("dropped_capture") + m.counter("dropped_output") - dropped0,
            "repeated": m.counter("repeated"),
            "stage_errors": m.counter("stage_errors"),
            "latency_p50_ms": float(np.percentile(latencies, 50)) if latencies else None,
            "latency_p99_ms": float(np.percentile(latencies, 99)) if latencies else None,
            "stage_p50_ms": stages,
            "remote": {**health, **{f"{k}_delta": health.get(k, 0) - health0.get(k, 0)
                                    for k in ("requests", "failures", "rows", "bytes_sent",
                                              "bytes_received")}} if health else None,
        }
    finally:
        streams.stop()
    print(json.dumps(doc), flush=True)


if __name__ == "__main__":
    main()

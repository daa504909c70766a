"""What a GIL hand-off costs a pipeline thread, at Python's switch interval and at livecam's.

One thread times calls that let go of the GIL for a moment, as the face follower makes them
every frame (``min``/``max``/``mean`` over a face's 468 landmarks, ``roi_from_landmarks``),
while ``--busy`` other threads run Python (as other streams' pipeline threads do); the same
calls with no other thread are the floor. For each switch interval: mean, p50 and p99 ms per
call. Prints a table and writes JSON.

    python -m scripts.bench_switching --out switching.json
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np


def timed(fn: object, calls: int) -> dict[str, float]:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1e3)
    ms = np.array(out)
    return {"mean_ms": float(ms.mean()), "p50_ms": float(np.median(ms)),
            "p99_ms": float(np.percentile(ms, 99))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=3, help="other threads running Python")
    parser.add_argument("--intervals-ms", default="5,1,0.25")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--out", type=Path, default=Path("switching.json"))
    args = parser.parse_args(argv)
    from livecam.analysis.roi import roi_from_landmarks

    marks = np.random.default_rng(0).random((468, 2), dtype=np.float32) * 300
    calls = {"landmarks.min(axis=0)": lambda: marks.min(axis=0),
             "landmarks.mean(axis=0)": lambda: marks.mean(axis=0),
             "roi_from_landmarks": lambda: roi_from_landmarks(marks)}
    saved = sys.getswitchinterval()
    rows = []
    try:
        for busy in (0, args.busy):
            for interval in [float(x) for x in args.intervals_ms.split(",")]:
                sys.setswitchinterval(interval / 1000.0)
                stop = threading.Event()

                def spin(stop: threading.Event = stop) -> None:
                    x = 0
                    while not stop.is_set():
                        x += 1

                threads = [threading.Thread(target=spin, daemon=True) for _ in range(busy)]
                for t in threads:
                    t.start()
                try:
                    for name, fn in calls.items():
                        rows.append({"busy_threads": busy, "interval_ms": interval,
                                     "call": name, **timed(fn, args.calls)})
                finally:
                    stop.set()
                    for t in threads:
                        t.join()
                if busy == 0:
                    break  # the floor does not depend on the interval
    finally:
        sys.setswitchinterval(saved)
    print("| other busy threads | switch interval ms | call | mean ms | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['busy_threads']} | {r['interval_ms']:g} | {r['call']} | "
              f"{r['mean_ms']:.3f} | {r['p50_ms']:.4f} | {r['p99_ms']:.3f} |")
    args.out.write_text(json.dumps({"python": sys.version.split()[0], "rows": rows}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

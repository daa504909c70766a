"""Glass-to-glass latency and fps of `livecam serve` sessions, measured from outside.

Starts `livecam serve` (a subprocess, as a user runs it; its own config/data dirs under
--work), adds a user, then runs N real aiortc WHIP clients at once. Each sends a clip whose
frames carry their index in a bar code (the leak clip ``still_2``, 1280x720, two real faces;
``--size`` scales it, which drops the code's width below what survives VP8 under 640 px),
looped at --fps, and reads back which input each received frame shows: latency = received −
last sent of that index, on one clock. Prints a table and writes JSON.

    python -m scripts.bench_remote --sessions 1 2 --seconds 20
    python -m scripts.bench_remote --sessions 1 --no-swap     # transport only (passthrough)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.leak_clips import leak_clips, read_index
from tests.helpers.whip_session import LoopedSession, start_server


async def _one(url: str, token: str, frames: list[np.ndarray], fps: float, seconds: float
               ) -> dict[str, Any]:
    latencies: list[float] = []
    received = new = 0
    last: int | None = None
    t_first: float | None = None
    t_connect = time.monotonic()
    async with LoopedSession(url, token, frames, fps=fps, timeout_s=120) as session:
        client, sent_at = session.client, session.sent_at
        await client.connect()
        while t_first is None or time.monotonic() < t_first + seconds:
            image = await client.received(timeout_s=120)
            if image is None:
                break
            index = read_index(image)
            if index is None:
                continue
            now = time.monotonic()
            if t_first is None:
                t_first = now
            received += 1
            if index != last and index in sent_at:
                new += 1
                latencies.append((now - sent_at[index]) * 1000)
            last = index
    wall = max(1e-9, time.monotonic() - (t_first or time.monotonic()))
    lat = np.asarray(latencies) if latencies else np.asarray([np.nan])
    return {"first_frame_s": round((t_first or np.nan) - t_connect, 2),
            "received_fps": round(received / wall, 1), "new_fps": round(new / wall, 1),
            "latency_p50_ms": round(float(np.percentile(lat, 50)), 1),
            "latency_p99_ms": round(float(np.percentile(lat, 99)), 1),
            "frames": len(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--no-swap", action="store_true", help="no identity: passthrough")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=Path("bench_remote.json"))
    args = parser.parse_args()
    frames = [f for f, _ in leak_clips()["still_2"].frames()]
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-remote-"))
    server = start_server(work, swap=not args.no_swap, max_sessions=max(args.sessions),
                          status_interval_s=5.0, start_timeout_s=180.0)
    url, token = server.url, server.tokens["alice"]
    rows: list[dict[str, Any]] = []
    try:
        for n in args.sessions:
            async def run_n(n: int = n) -> list[dict[str, Any]]:
                return list(await asyncio.gather(*(_one(url, token, frames, args.fps,
                                                        args.seconds) for _ in range(n))))

            for k, result in enumerate(asyncio.run(run_n())):
                rows.append({"sessions": n, "session": k, **result})
            time.sleep(2.0)  # the sessions' streams removed before the next count
    finally:
        server.proc.terminate()
        server.proc.wait(60)
    print(f"{'sessions':>8} {'#':>2} {'first s':>8} {'recv fps':>8} {'new fps':>8} "
          f"{'p50 ms':>8} {'p99 ms':>8}")
    for r in rows:
        print(f"{r['sessions']:>8} {r['session']:>2} {r['first_frame_s']:>8} "
              f"{r['received_fps']:>8} {r['new_fps']:>8} {r['latency_p50_ms']:>8} "
              f"{r['latency_p99_ms']:>8}")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    doc = {"command": " ".join(sys.argv), "swap": "none" if args.no_swap else "classic",
           "size": "1280x720", "fps": args.fps, "host": platform.node(),
           "cpus": os.cpu_count(), "loadavg": load, "rows": rows,
           "server_log_tail": server.log.read_text()[-3000:]}
    args.json.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.json} (load average {load[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()

"""SIGTERM under load: how long `livecam daemon` takes from the signal to its exit.

    python -m scripts.bench_sigterm [--tries 10] [--idle 3000] [--json bench_sigterm.json]
                                     [--root DIR] [--output file|null] [--hog 2]

Each try starts a daemon swapping a real face (a looping clip of a person from insightface's
t1, identities from real photos, see ``daemon_harness.py``) into a `file:` recording, opens
``--idle`` idle connections to the control API, switches identities and bypass every 0.1 s
through the API, and after ``--load-s`` seconds sends SIGTERM while all that goes on. It
measures the time until the process has exited, checks the exit code, that the recording
decodes to the end, and that every stderr line is one JSON object. The daemon logs where its
stop went (``stop timings`` record), shown per try. ``--hog N`` keeps N processes spinning on
the CPU for the whole benchmark (issue 39 item 15: both cores saturated).

Prints a table, writes JSON; exits 1 unless every try exits 0 within ``--limit-s`` (1 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from scripts.daemon_harness import IDENTITIES, Daemon, DaemonEnv, free_port


def open_idle(port: int, n: int) -> list[socket.socket]:
    """``n`` connected sockets that never send a byte (non-blocking connects: a full listen
    backlog must not stall the benchmark itself)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def _spin() -> None:
    while True:
        pass


def start_hogs(n: int) -> list[Any]:
    """``n`` processes that spin on the CPU until terminated."""
    import multiprocessing

    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(n)]
    for h in hogs:
        h.start()
    return hogs


def switcher(d: Daemon, stop: threading.Event, counts: dict[str, int]) -> None:
    """Select each identity in turn and toggle bypass, every 0.1 s, until ``stop``."""
    k = 0
    while not stop.is_set():
        try:
            if k % 4 == 3:
                d.post("/api/bypass", {"on": k % 8 == 3})
            else:
                d.post("/api/select", {"name": IDENTITIES[k % len(IDENTITIES)]})
            counts["ok"] += 1
        except OSError:
            counts["failed"] += 1  # expected once the daemon is stopping
        k += 1
        stop.wait(0.1)


def decode_frames(path: Path) -> tuple[int, str]:
    """(frames decoded, error or "") of a recording."""
    import av

    try:
        with av.open(str(path)) as container:
            return sum(1 for _ in container.decode(video=0)), ""
    except (av.error.FFmpegError, OSError) as exc:
        return 0, str(exc)


def one_try(env: DaemonEnv, k: int, args: argparse.Namespace) -> dict[str, Any]:
    out = env.root / f"sigterm-{k}.mp4"
    out.unlink(missing_ok=True)
    output = ["--output", f"file:{out}"] if args.output == "file" else ["--output", "null"]
    d = env.start([*output, "--set", "advanced.pipeline.status_interval_s=0"], port=free_port(),
                  stderr_path=env.root / f"sigterm-{k}.log")
    status = d.wait_ready(min_frames=30)
    idle = open_idle(d.port, args.idle)
    stop = threading.Event()
    counts = {"ok": 0, "failed": 0}
    thread = threading.Thread(target=switcher, args=(d, stop, counts), daemon=True)
    thread.start()
    time.sleep(args.load_s)
    sent_before = d.status()["frames"]["sent"]
    code, elapsed_s = d.terminate()
    stop.set()
    thread.join(5)
    for s in idle:
        s.close()
    records, other = d.log_records()
    timings = next((r.get("timings_ms") for r in records if r.get("msg", "").startswith(
        "stop timings")), None)
    frames, error = decode_frames(out) if args.output == "file" else (0, "")
    return {"try": k, "exit_code": code, "exit_s": round(elapsed_s, 3),
            "backend": status.get("backend"), "sent_before_signal": sent_before,
            "frames_in_file": frames, "file_error": error, "switches": counts["ok"],
            "non_json_lines": len(other), "first_non_json": other[:3], "timings_ms": timings}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--idle", type=int, default=3000, help="idle API connections")
    parser.add_argument("--load-s", type=float, default=2.0,
                        help="seconds of load (idle sockets + switching) before SIGTERM")
    parser.add_argument("--limit-s", type=float, default=1.0)
    parser.add_argument("--output", choices=("file", "null"), default="file")
    parser.add_argument("--root", help="environment folder (default: a temporary one)")
    parser.add_argument("--json", default="bench_sigterm.json")
    parser.add_argument("--hog", type=int, default=0,
                        help="processes spinning on the CPU throughout (saturated cores)")
    args = parser.parse_args()

    hogs = start_hogs(args.hog)
    try:
        rows = run_tries(args)
    finally:
        for h in hogs:
            h.terminate()
    good = [r for r in rows if r["exit_code"] == 0 and r["exit_s"] <= args.limit_s
            and not r["file_error"] and (args.output != "file" or r["frames_in_file"] > 0)
            and r["non_json_lines"] == 0]
    times = sorted(r["exit_s"] for r in rows)
    summary = {"tries": len(rows), "good": len(good), "idle_connections": args.idle,
               "hogs": args.hog, "limit_s": args.limit_s, "exit_s_min": times[0],
               "exit_s_median": times[len(times) // 2], "exit_s_max": times[-1]}
    print(f"\n| tries | exit 0, <= {args.limit_s:.1f} s, file ok, JSON-only stderr | min s | "
          "median s | max s |")
    print("|---|---|---|---|---|")
    print(f"| {len(rows)} | {len(good)} | {times[0]:.3f} | {summary['exit_s_median']:.3f} | "
          f"{times[-1]:.3f} |")
    Path(args.json).write_text(json.dumps({"summary": summary, "tries": rows}, indent=1))
    return 0 if len(good) == len(rows) else 1


def run_tries(args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="livecam-sigterm-") as tmp:
        env = DaemonEnv.create(Path(args.root) if args.root else Path(tmp))
        rows = []
        for k in range(args.tries):
            row = one_try(env, k, args)
            rows.append(row)
            t = row["timings_ms"] or {}
            print(f"try {k}: exit {row['exit_code']} after {row['exit_s'] * 1000:6.0f} ms | "
                  f"file frames {row['frames_in_file']:4d} (sent {row['sent_before_signal']}) "
                  f"{row['file_error'] or 'ok'} | non-JSON lines {row['non_json_lines']} | "
                  f"switches {row['switches']} | stop: "
                  + " ".join(f"{name}={ms:.0f}" for name, ms in t.items()), flush=True)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())

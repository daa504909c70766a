"""Idle-socket flood on a real `livecam run` (or `daemon`): does `livecam ctl` still answer,
and does the output keep its rate? Prints a table and writes JSON.

    python -m scripts.bench_idle_flood [--daemon | --swap | --server-only] [--sockets 3000]
                                       [--rounds 3] [--json out/bench_idle_flood.json]

Starts livecam as :mod:`scripts.attack_api` does (synthetic 640x360 input at 30 fps, null
output, an empty identity library: the stages are a pass-through; with ``--swap`` a daemon
that swaps the face of a looping clip of a real person instead), then alternates, each
``--rounds`` times, a quiet phase and a flood phase of the same length. In a flood phase
``--sockets`` local connections that never send a byte are opened (non-blocking, as fast as
the kernel takes them) and held for the phase; in both phases ``--ctl-tries`` runs of
`livecam ctl status` are made one after another (each a process with ctl's own 5 s deadline),
so the only difference between the two is the sockets.

Columns: `ctl ok` = tries that exited 0, `ctl max s` = the slowest try; `sent` = frames the
output sent from the phase's start to the metrics read after it
(`livecam_frames_total{kind="sent"}`) against `expected` = that time x 30 fps; `>1.5f` =
output intervals over 50 ms (1.5 frame intervals: the output repeats a frame after that by
design, so it is what a quiet run shows too) from the `livecam_output_interval_seconds`
histogram, `bucket` = the upper bound in ms of the longest interval in the phase; `extra cpu
s` = livecam's CPU seconds in the phase minus the quiet phases' mean rate times its length.
Compare each flood phase with the quiet ones: on a shared host both move.

``--server-only`` floods the HTTP server alone in this process (no livecam pipeline) and reports
its thread's CPU seconds per flood, which the host's load moves little: the cost of the flood
itself. Linux only (reads /proc); every connection goes to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from scripts.attack_api import FPS, Livecam, _gap_from_histogram, cpu_s
from scripts.daemon_harness import DaemonEnv
from tests.helpers.sockets import idle_sockets


class SwapDaemon(Livecam):
    """`livecam daemon` swapping a real face (:mod:`scripts.daemon_harness`'s looping clip
    of a person, identity ``astro``): the frame threads busy as a user's are."""

    def __init__(self, home: Path) -> None:  # not Livecam's start: the harness's daemon
        env = DaemonEnv.create(home)
        self.token_file = env.root / "config" / "livecam" / "api-token"
        daemon = env.start(["--output", "null", "--identity", "astro",
                            "--set", "advanced.pipeline.status_interval_s=0"],
                           stderr_path=home / "livecam.log")
        self.port, self.proc = daemon.port, daemon.proc
        self.log = open(os.devnull, "w")  # noqa: SIM115 (closed in stop)
        daemon.wait_ready(min_frames=30)
        self.token = self.token_file.read_text().strip()


def read_metrics(cam: Livecam) -> tuple[dict[str, float], float]:
    """The output-interval histogram's cumulative buckets and the count of frames sent."""
    buckets: dict[str, float] = {}
    sent = 0.0
    for family in text_string_to_metric_families(cam.get("/metrics").decode()):
        if family.name == "livecam_output_interval_seconds":
            buckets = {s.labels["le"]: s.value for s in family.samples
                       if s.name.endswith("_bucket")}
        elif family.name == "livecam_frames":
            sent = sum(s.value for s in family.samples
                       if s.name == "livecam_frames_total" and s.labels.get("kind") == "sent")
    return buckets, sent


def ctl_status(cam: Livecam) -> tuple[bool, float, str]:
    """One `livecam ctl status` against ``cam``: (exit 0, seconds, last stderr line)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "ctl", "--url", f"http://127.0.0.1:{cam.port}",
         "--token-file", str(cam.token_file), "status"],
        capture_output=True, text=True, timeout=60, check=False)
    lines = proc.stderr.strip().splitlines()
    return proc.returncode == 0, time.perf_counter() - t0, lines[-1] if lines else ""


def phase(cam: Livecam, name: str, sockets: int, tries: int, min_s: float) -> dict[str, Any]:
    hist0, sent0 = read_metrics(cam)
    cpu0 = cpu_s(cam.proc.pid)
    t0 = time.perf_counter()  # the frames sent are counted from here to the second read
    with idle_sockets(cam.port, sockets):
        open_s = time.perf_counter() - t0
        results = [ctl_status(cam) for _ in range(tries)]
        time.sleep(max(0.0, min_s - (time.perf_counter() - t0)))
    elapsed = time.perf_counter() - t0
    cpu = cpu_s(cam.proc.pid) - cpu0
    hist1, sent1 = read_metrics(cam)  # after the phase: the API answers again
    counted_s = time.perf_counter() - t0
    over, highest = _gap_from_histogram(hist0, hist1)
    failures = sorted({why for ok, _, why in results if not ok})
    return {"phase": name, "sockets": sockets, "phase_s": round(elapsed, 2),
            "open_s": round(open_s, 3), "ctl_tries": tries,
            "ctl_ok": sum(ok for ok, _, _ in results),
            "ctl_max_s": round(max((t for _, t, _ in results), default=0.0), 2),
            "ctl_failures": failures, "frames_sent": int(sent1 - sent0),
            "frames_expected": round(counted_s * FPS), "intervals_over_1.5_frames": over,
            "longest_interval_bucket_ms": highest, "cpu_s": round(cpu, 2)}


def server_only(sockets: int, rounds: int, hold_s: float) -> list[dict[str, Any]]:
    """The control API's HTTP server alone (livecam.control.http, its default limits) in this
    process, with a trivial handler: the server thread's CPU seconds per flood, from
    /proc/self/task (CPU time, so the host's load moves it little), connections given to
    aiohttp, idle ones closed to make room, and 5 GETs made during the flood."""
    import threading
    import urllib.request

    from aiohttp import web

    from livecam.control.http import HttpServer, Limits, bind_socket

    def make_app() -> web.Application:
        async def ok(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/ok", ok)
        return app

    server = HttpServer(make_app, bind_socket("127.0.0.1", 0, Limits().backlog), Limits())
    server.start()
    thread = next(t for t in threading.enumerate() if t.name == "livecam-control-api")

    def thread_cpu_s() -> float:
        with open(f"/proc/self/task/{thread.native_id}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def get() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/ok", timeout=5) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    results = []
    try:
        for r in range(rounds):
            cpu0, evicted0 = thread_cpu_s(), server.evicted
            handed0 = getattr(server, "handed_on", 0)
            with idle_sockets(server.port, sockets):
                t0 = time.perf_counter()
                answered = [get() for _ in range(5)]
                get_s = time.perf_counter() - t0
                time.sleep(hold_s)
            time.sleep(1.0)
            row = {"round": r + 1, "sockets": sockets,
                   "server_thread_cpu_s": round(thread_cpu_s() - cpu0, 3),
                   "gets_ok": sum(answered), "gets_s": round(get_s, 2),
                   "evicted": server.evicted - evicted0,
                   "handed_to_aiohttp": (getattr(server, "handed_on", 0) - handed0
                                         if hasattr(server, "handed_on") else None)}
            results.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.stop()
    print(f"\n{'round':>5} {'sockets':>7} {'server cpu s':>12} {'gets ok':>7} {'gets s':>6} "
          f"{'evicted':>7} {'to aiohttp':>10}")
    for row in results:
        print(f"{row['round']:5d} {row['sockets']:7d} {row['server_thread_cpu_s']:12.3f} "
              f"{row['gets_ok']:>5}/5 {row['gets_s']:6.2f} {row['evicted']:7d} "
              f"{'-' if row['handed_to_aiohttp'] is None else row['handed_to_aiohttp']:>10}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemon", action="store_true", help="flood `livecam daemon`")
    parser.add_argument("--swap", action="store_true",
                        help="flood a daemon that swaps a real face (implies --daemon)")
    parser.add_argument("--server-only", action="store_true",
                        help="flood the HTTP server alone, in this process (its CPU per flood)")
    parser.add_argument("--sockets", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ctl-tries", type=int, default=5)
    parser.add_argument("--min-phase-s", type=float, default=8.0,
                        help="a phase lasts at least this long (past the 5 s idle timeout)")
    parser.add_argument("--json", type=Path, default=Path("out/bench_idle_flood.json"))
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.sockets + 1000), hard))
    if args.server_only:
        rows = server_only(args.sockets, args.rounds, args.min_phase_s)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"mode": "server only", "load_avg": os.getloadavg(),
                                         "rounds": rows}, indent=1))
        print(f"wrote {args.json}")
        return 0
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        args.daemon = args.daemon or args.swap
        cam = SwapDaemon(Path(tmp)) if args.swap else Livecam(args.daemon, Path(tmp))
        try:
            time.sleep(3.0)  # past start-up
            for r in range(args.rounds):
                for name, n in (("quiet", 0), (f"{args.sockets} idle sockets", args.sockets)):
                    result = phase(cam, name, n, args.ctl_tries, args.min_phase_s)
                    result["round"] = r + 1
                    results.append(result)
                    print(json.dumps(result), flush=True)
                    time.sleep(1.0)  # the closed sockets' last FINs
        finally:
            with contextlib.suppress(OSError):
                cam.stop(signal.SIGTERM if args.daemon else signal.SIGINT)
    quiet = [r["cpu_s"] / r["phase_s"] for r in results if r["sockets"] == 0]
    quiet_rate = sum(quiet) / len(quiet) if quiet else 0.0
    for r in results:
        r["extra_cpu_s"] = round(r["cpu_s"] - quiet_rate * r["phase_s"], 2)

    def show(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    print(f"\n{'round':>5} {'phase':18} {'ctl ok':>7} {'ctl max s':>9} {'sent':>5} "
          f"{'expected':>8} {'>1.5f':>5} {'bucket':>6} {'extra cpu s':>11}")
    for r in results:
        print(f"{r['round']:5d} {r['phase']:18} {r['ctl_ok']:>3}/{r['ctl_tries']:<3} "
              f"{r['ctl_max_s']:9.2f} {r['frames_sent']:5d} {r['frames_expected']:8d} "
              f"{show(r['intervals_over_1.5_frames'], '5d')} "
              f"{show(r['longest_interval_bucket_ms'], '6.0f')} {r['extra_cpu_s']:11.2f}")
        for why in r["ctl_failures"]:
            print(f"{'':25} ctl: {why}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    mode = "daemon, swapping" if args.swap else "daemon" if args.daemon else "run"
    args.json.write_text(json.dumps({"mode": mode, "fps": FPS,
                                     "load_avg": os.getloadavg(), "phases": results},
                                    indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

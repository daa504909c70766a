"""Soak test: run `livecam daemon` for a while with a real face; watch it for leaks and errors.

    python -m scripts.soak --duration-s 1800 [--json soak.json] [--output null|file]
                           [--switch-every-s 5] [--sample-every-s 10] [--root DIR]
    nice -n 10 python -m scripts.soak ...      # on a shared machine (the daemon inherits it)

The daemon reads a looping `file:` clip of a real person (insightface's t1 photo) and swaps
identities from real photos (see ``daemon_harness.py``). Every ``--switch-every-s`` the script
selects the next identity or toggles bypass with ``livecam ctl`` (a new process each time, as
a user would); every ``--sample-every-s`` it samples the daemon's RSS, threads and open fds
from /proc and fps, latency and frame counters from ``livecam ctl --json status``, and counts
ERROR/CRITICAL records and non-JSON lines on its stderr. At the end it sends SIGTERM.

Growth compares samples after ``--warmup-s`` (in which every identity and bypass has been
used once) by their medians: RSS of the first quarter against the last; threads and fds of the
first half against the second. The daemon's threads come and go (the looping clip's decoder
threads end and start again: 14-25 samples around a steady 19 in two 2-minute CI soaks), so
the median of a quarter's four samples moved with two transients, and the fewest seen moved
with one; a half's nine samples keep the steady count, and a thread or fd that never goes away
still raises it. Exits 1 when RSS grew by ``--max-rss-growth-pct`` (5) or more, fds or threads
grew at all, any error was logged, stderr held a non-JSON line, a ``ctl`` call failed, or the
daemon did not exit 0. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.daemon_harness import IDENTITIES, Daemon, DaemonEnv, free_port


def proc_sample(pid: int) -> dict[str, float]:
    """RSS (MB), threads and open fds of ``pid`` from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return {"rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
            "threads": int(fields["Threads"]),
            "fds": len(list(Path(f"/proc/{pid}/fd").iterdir()))}


def actions() -> list[list[str]]:
    """The cycle of commands: each identity, bypass on and off, no identity, next."""
    cycle = [["select", name] for name in IDENTITIES]
    return [*cycle, ["bypass", "on"], ["bypass", "off"], ["select", "none"], ["next"]]


class Soak:
    def __init__(self, d: Daemon, args: argparse.Namespace) -> None:
        self.d = d
        self.args = args
        self.samples: list[dict[str, Any]] = []
        self.ctl_calls = 0
        self.ctl_failures: list[str] = []
        self._actions = actions()
        self._k = 0

    def switch(self) -> None:
        act = self._actions[self._k % len(self._actions)]
        self._k += 1
        result = self.d.ctl(*act)
        self.ctl_calls += 1
        if result.returncode != 0:
            self.ctl_failures.append(f"ctl {' '.join(act)}: {result.stderr.strip()[-300:]}")

    def sample(self, t_s: float) -> dict[str, Any]:
        result = self.d.ctl("--json", "status")
        self.ctl_calls += 1
        if result.returncode != 0:
            self.ctl_failures.append(f"ctl status: {result.stderr.strip()[-300:]}")
            status: dict[str, Any] = {}
        else:
            status = json.loads(result.stdout)
        records, other = self.d.log_records()
        errors = [r for r in records if r.get("level") in ("ERROR", "CRITICAL")]
        frames = status.get("frames", {})
        latency = status.get("latency_ms", {})
        row = {"t_s": round(t_s, 1), **proc_sample(self.d.proc.pid),
               "fps_in": status.get("fps_in"), "fps_out": status.get("fps_out"),
               "p50_ms": latency.get("p50"), "p99_ms": latency.get("p99"),
               "sent": frames.get("sent"), "stage_errors": frames.get("stage_errors"),
               "dropped": sum(frames.get(k, 0) for k in ("dropped_capture", "dropped_output",
                                                          "dropped_pipeline")),
               "identity": status.get("active_identity"), "bypass": status.get("bypass"),
               "log_errors": len(errors), "non_json": len(other)}
        self.samples.append(row)
        return row

    def run(self) -> None:
        a = self.args
        t0 = time.monotonic()
        for _ in range(len(self._actions)):  # warm-up: every identity and bypass once
            self.switch()
        next_switch = next_sample = time.monotonic()
        print(f"{'t s':>7} {'RSS MB':>7} {'thr':>4} {'fds':>4} {'fps in':>6} {'out':>5} "
              f"{'p50 ms':>7} {'p99 ms':>7} {'sent':>7} {'stage err':>9} {'log err':>7} "
              "identity", flush=True)
        while (now := time.monotonic()) - t0 < a.duration_s:
            if self.d.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.d.proc.returncode} during the soak")
            if now >= next_switch:
                self.switch()
                next_switch += a.switch_every_s
            if now >= next_sample:
                r = self.sample(now - t0)
                print(f"{r['t_s']:7.0f} {r['rss_mb']:7.1f} {r['threads']:4d} {r['fds']:4d} "
                      f"{r['fps_in'] or 0:6.1f} {r['fps_out'] or 0:5.1f} {r['p50_ms'] or 0:7.1f} "
                      f"{r['p99_ms'] or 0:7.1f} {r['sent'] or 0:7d} {r['stage_errors'] or 0:9d} "
                      f"{r['log_errors']:7d} {r['identity']}{' (bypass)' if r['bypass'] else ''}",
                      flush=True)
                next_sample += a.sample_every_s
            time.sleep(max(0.0, min(next_switch, next_sample) - time.monotonic()))


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def verdict(soak: Soak, args: argparse.Namespace, exit_code: int, exit_s: float
            ) -> dict[str, Any]:
    rows = [r for r in soak.samples if r["t_s"] >= args.warmup_s]
    quarter, half = max(1, len(rows) // 4), max(1, len(rows) // 2)
    first, last = rows[:quarter], rows[-quarter:]
    early, late = rows[:half], rows[-half:]  # threads and fds (see the module's docstring)
    rss0, rss1 = _median(first, "rss_mb"), _median(last, "rss_mb")
    final = soak.samples[-1]
    fps = [r["fps_out"] for r in rows if r["fps_out"] is not None]
    p99 = [r["p99_ms"] for r in rows if r["p99_ms"] is not None]
    summary = {
        "duration_s": args.duration_s, "samples": len(soak.samples),
        "rss_mb_start": round(rss0, 1), "rss_mb_end": round(rss1, 1),
        "rss_growth_pct": round(100 * (rss1 - rss0) / rss0, 2),
        "rss_mb_max": round(max(r["rss_mb"] for r in soak.samples), 1),
        "threads_start": _median(early, "threads"), "threads_end": _median(late, "threads"),
        "fds_start": _median(early, "fds"), "fds_end": _median(late, "fds"),
        "threads_max": max(r["threads"] for r in soak.samples),
        "fds_max": max(r["fds"] for r in soak.samples),
        "fps_out_median": round(statistics.median(fps), 2) if fps else None,
        "fps_out_min": min(fps) if fps else None,
        "p99_ms_max": max(p99) if p99 else None,
        "frames_sent": final["sent"], "stage_errors": final["stage_errors"],
        "log_errors": final["log_errors"], "non_json_lines": final["non_json"],
        "ctl_calls": soak.ctl_calls, "ctl_failures": len(soak.ctl_failures),
        "exit_code": exit_code, "sigterm_exit_s": round(exit_s, 3),
    }
    failures = []
    if summary["rss_growth_pct"] >= args.max_rss_growth_pct:
        failures.append(f"RSS grew {summary['rss_growth_pct']} % (limit "
                        f"{args.max_rss_growth_pct} %)")
    for key in ("threads", "fds"):
        if summary[f"{key}_end"] > summary[f"{key}_start"]:
            failures.append(f"{key} grew {summary[f'{key}_start']} -> {summary[f'{key}_end']}")
    for key in ("log_errors", "stage_errors", "non_json_lines", "ctl_failures"):
        if summary[key]:
            failures.append(f"{key}: {summary[key]}")
    if exit_code != 0:
        failures.append(f"exit code {exit_code} after SIGTERM")
    summary["failures"] = failures
    return summary


def main() -> int:
    if not sys.platform.startswith("linux"):
        print("soak.py reads /proc: Linux only", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=1800)
    parser.add_argument("--warmup-s", type=float, default=30)
    parser.add_argument("--switch-every-s", type=float, default=5)
    parser.add_argument("--sample-every-s", type=float, default=10)
    parser.add_argument("--max-rss-growth-pct", type=float, default=5.0)
    parser.add_argument("--output", choices=("null", "file"), default="null",
                        help="null: what a virtual camera costs minus the device; file: also "
                        "encode H.264 (the recording grows by ~1 MB a minute)")
    parser.add_argument("--root", help="environment folder (default: a temporary one)")
    parser.add_argument("--json", default="soak.json")
    args = parser.parse_args()
    if args.duration_s < args.warmup_s + 4 * args.sample_every_s:
        parser.error("--duration-s must leave at least 4 samples after --warmup-s")

    with tempfile.TemporaryDirectory(prefix="livecam-soak-") as tmp:
        env = DaemonEnv.create(Path(args.root) if args.root else Path(tmp))
        output = f"file:{env.root / 'soak.mp4'}" if args.output == "file" else "null"
        d = env.start(["--output", output, "--set", "advanced.pipeline.status_interval_s=60"],
                      port=free_port(), stderr_path=env.root / "soak-daemon.log")
        try:
            status = d.wait_ready(min_frames=30)
            print(f"daemon pid {d.proc.pid}: {status['backend']}, {status['width']}x"
                  f"{status['height']} at {status['fps']} fps, input {status['input']}",
                  flush=True)
            soak = Soak(d, args)
            soak.run()
            soak.sample(args.duration_s)
        finally:
            exit_code, exit_s = d.terminate()
        summary = verdict(soak, args, exit_code, exit_s)
        _, other = d.log_records()
        summary["non_json_lines"] = len(other)
        errors = [r for r in d.log_records()[0] if r.get("level") in ("ERROR", "CRITICAL")]
    print("\n| minutes | RSS MB start -> end (growth) | threads (max) | fds (max) "
          "| fps out median (min) "
          "| p99 ms max | frames sent | errors | SIGTERM exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    s = summary
    print(f"| {s['duration_s'] / 60:.1f} | {s['rss_mb_start']} -> {s['rss_mb_end']} "
          f"({s['rss_growth_pct']:+.2f} %) | {s['threads_start']:.0f} -> {s['threads_end']:.0f} "
          f"({s['threads_max']}) | {s['fds_start']:.0f} -> {s['fds_end']:.0f} ({s['fds_max']}) "
          f"| {s['fps_out_median']} "
          f"({s['fps_out_min']}) | {s['p99_ms_max']} | {s['frames_sent']} | "
          f"{s['log_errors']} log, {s['stage_errors']} stage, {s['ctl_failures']} ctl | "
          f"{s['exit_code']} in {s['sigterm_exit_s']} s |")
    for failure in summary["failures"]:
        print(f"FAIL: {failure}")
    Path(args.json).write_text(json.dumps({"summary": summary, "samples": soak.samples,
                                           "ctl_failures": soak.ctl_failures,
                                           "error_records": errors[:50]}, indent=1))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

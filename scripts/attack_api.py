"""Attack a real `livecam run` (or `daemon`) through its control API, as issue 11 did, and
measure what it costs the stream. Prints a table and writes JSON.

    python -m scripts.attack_api [--daemon] [--json out/attack_api.json]

Starts livecam with a synthetic input and the null output (and an empty identity library in a
temporary home, so the stages are a pass-through), its API on a free 127.0.0.1 port, then:

1. 200 concurrent authenticated POSTs (`/api/next`): all answered? the slowest?
2. 3,000 idle sockets opened, held, then closed: the output's longest inter-frame gap (from
   the status document's 10 s window and the `livecam_output_interval_seconds` histogram),
   the server's thread count, and whether the API still answers at once;
3. a 200 MB body without a token (Content-Length, then `Content-Length: -1`, then chunked): the
   server's peak RSS growth while the client pushes as fast as it can, and when it answered;
4. SIGTERM: seconds to exit.

Table columns: `gap ms`/`frames` = the longest interval between two output frames in the 10 s
before the phase's reading (the status document's window: includes some quiet time), `>1.5f`
= intervals over 50 ms during the phase (the `livecam_output_interval_seconds` histogram), and
`bucket` = the upper bound (ms) of the longest interval seen in the phase; `extra_cpu_s` = CPU
seconds livecam used during the phase beyond its quiet rate (what the attack cost it: less
sensitive to the host's load than the gaps). The output repeats
a frame after 1.5 intervals by design, so on a loaded host the quiet baseline alone reaches
about 1.5 frames: compare each phase with it.

Linux only (reads /proc/PID/status); every connection goes to 127.0.0.1 and every loop is
bounded in count and time. Numbers drift with load on a shared host: run it twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

FPS = 30.0
FRAME_MS = 1000 / FPS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (kB) and Threads of ``pid``."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                out[key] = int(value.split()[0])
    return out


class Livecam:
    """The livecam process under attack, and reads of its API."""

    def __init__(self, daemon: bool, home: Path) -> None:
        self.port = free_port()
        self.token_file = home / "api-token"
        env = {**os.environ, "XDG_DATA_HOME": str(home / "data"),
               "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
               "XDG_RUNTIME_DIR": str(home / "run")}
        (home / "run").mkdir(mode=0o700)
        args = [sys.executable, "-m", "livecam.cli", "daemon" if daemon else "run",
                "--input", "synthetic:640x360", "--output", "null",
                "--set", f"control.api_address=127.0.0.1:{self.port}",
                "--set", f"advanced.control.token_file={self.token_file}",
                "--set", "advanced.pipeline.status_interval_s=0", "--set", f"capture.fps={FPS:g}"]
        if not daemon:
            args += ["--set", "control.hotkeys=false"]
        self.log = open(home / "livecam.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.token = self.token_file.read_text().strip()
                self.status()
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit(f"livecam did not start; see {home / 'livecam.log'}"
                                     ) from None
                time.sleep(0.2)

    def get(self, path: str, timeout_s: float = 10.0) -> bytes:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return bytes(resp.read())

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.get("/api/status")))

    def intervals(self) -> dict[str, float] | None:
        """The ``livecam_output_interval_seconds`` histogram's cumulative bucket counts by
        upper bound ("0.05", ..., "+Inf"); None when this livecam has no such metric."""
        try:
            text = self.get("/metrics").decode()
        except (OSError, ValueError):
            return None
        for family in text_string_to_metric_families(text):
            if family.name == "livecam_output_interval_seconds":
                return {s.labels["le"]: s.value for s in family.samples
                        if s.name.endswith("_bucket")}
        return None

    def stop(self, sig: signal.Signals) -> float:
        t0 = time.perf_counter()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return time.perf_counter() - t0


async def _one(port: int, raw: bytes, timeout_s: float) -> tuple[int | None, float]:
    t0 = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port),
                                                timeout_s)
        writer.write(raw)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout_s)
        writer.close()
        return (int(line.split()[1]) if line else None), time.perf_counter() - t0
    except (OSError, TimeoutError, ValueError, IndexError):
        return None, time.perf_counter() - t0


def concurrent(cam: Livecam, n: int = 200, timeout_s: float = 45.0) -> dict[str, Any]:
    raw = (f"POST /api/next HTTP/1.1\r\nHost: 127.0.0.1:{cam.port}\r\nAuthorization: Bearer "
           f"{cam.token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").encode()

    async def run() -> list[tuple[int | None, float]]:
        return await asyncio.gather(*[_one(cam.port, raw, timeout_s) for _ in range(n)])

    results = asyncio.run(run())
    ok = [t for status, t in results if status == 200]
    slowest = max(t for _, t in results)
    return {"requests": n, "answered_200": len(ok), "slowest_s": round(slowest, 3),
            "all_within_2s": len(ok) == n and slowest <= 2.0}


def idle_sockets(cam: Livecam, n: int = 3000, hold_s: float = 4.0) -> dict[str, Any]:
    threads_before = proc_status(cam.proc.pid)["Threads"]
    socks = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", cam.port))  # non-blocking: completes in the kernel
        socks.append(s)
    open_s = time.perf_counter() - t0
    time.sleep(hold_s / 2)
    threads_during = proc_status(cam.proc.pid)["Threads"]
    time.sleep(hold_s / 2)
    for s in socks:
        s.close()
    t1 = time.perf_counter()
    try:
        cam.status()
        answer_s: float | None = time.perf_counter() - t1
    except (OSError, ValueError):
        answer_s = None  # no answer within 10 s
    return {"sockets": n, "open_s": round(open_s, 3), "hold_s": hold_s,
            "server_threads_before": threads_before, "server_threads_during": threads_during,
            "status_answer_after_close_s": None if answer_s is None else round(answer_s, 3)}


def big_body(cam: Livecam, header: str, size: int = 200 * 1024 * 1024,
             chunked: bool = False, timeout_s: float = 30.0) -> dict[str, Any]:
    """Push ``size`` bytes without a token as fast as the server takes them; sample its RSS."""
    base = proc_status(cam.proc.pid)["VmRSS"]
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak.append(proc_status(cam.proc.pid)["VmRSS"])
            stop.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    sock = socket.create_connection(("127.0.0.1", cam.port), timeout=timeout_s)
    sock.sendall(f"POST /api/select HTTP/1.1\r\nHost: 127.0.0.1:{cam.port}\r\n{header}\r\n\r\n"
                 .encode())
    sock.setblocking(False)
    block = (b"10000\r\n" + b"x" * 0x10000 + b"\r\n") if chunked else b"x" * 65536
    t0 = time.perf_counter()
    sent, status, buf = 0, None, b""
    while time.perf_counter() - t0 < timeout_s:
        try:
            data = sock.recv(4096)
            if not data:
                break
            buf += data
            if b"\r\n" in buf:
                status = int(buf.split()[1])
                break
        except BlockingIOError:
            pass
        except OSError:
            break
        if sent < size:
            try:
                sent += sock.send(block)
            except BlockingIOError:
                time.sleep(0.0005)
            except OSError:
                break
        else:
            time.sleep(0.001)
    answer_s = time.perf_counter() - t0
    # keep pushing for a second after the answer, as an attacker would
    t_end = time.perf_counter() + 1.0
    while time.perf_counter() < t_end and sent < size:
        try:
            sent += sock.send(block)
        except BlockingIOError:
            time.sleep(0.0005)
        except OSError:
            break
    sock.close()
    time.sleep(0.5)
    stop.set()
    sampler.join()
    return {"header": header, "status": status, "answer_s": round(answer_s, 3),
            "body_mb_sent": round(sent / 2**20, 1),
            "rss_growth_mb": round((max(peak) - base) / 1024, 1)}


def _gap_from_histogram(before: dict[str, float] | None, after: dict[str, float] | None
                        ) -> tuple[int | None, float | None]:
    """(intervals over 1.5 frames, the upper bound in ms of the highest bucket that got an
    interval) between two reads of the interval histogram."""
    if before is None or after is None:
        return None, None
    over = int((after["+Inf"] - after["0.05"]) - (before["+Inf"] - before["0.05"]))
    bounds = sorted((float(k), k) for k in after if k != "+Inf")
    highest = None
    previous = 0.0
    for value, key in bounds:
        got = (after[key] - before[key]) - previous
        previous = after[key] - before[key]
        if got > 0:
            highest = value * 1000
    if after["+Inf"] - before["+Inf"] > previous:
        highest = float("inf")
    return over, highest


class Phases:
    """Runs attacks one after another, each alone in the status document's 10 s gap window."""

    def __init__(self, cam: Livecam) -> None:
        self._cam = cam
        self._t_last_read = 0.0
        self.results: list[dict[str, Any]] = []
        self.cpu_per_s: float | None = None

    def run(self, name: str, attack: Any) -> None:
        # start once the previous phase has left the status document's 10 s gap window
        time.sleep(max(0.0, self._t_last_read + 10.0 - time.monotonic()))
        cam = self._cam
        hist0 = cam.intervals()
        cpu0 = cpu_s(cam.proc.pid)
        t0 = time.perf_counter()
        result = attack()
        elapsed = time.perf_counter() - t0
        time.sleep(1.0)
        hist1 = cam.intervals()
        cpu = cpu_s(cam.proc.pid) - cpu0
        if self.cpu_per_s is None:  # the first phase is the quiet baseline
            self.cpu_per_s = cpu / (elapsed + 1.0)
        result["extra_cpu_s"] = round(cpu - self.cpu_per_s * (elapsed + 1.0), 2)
        try:
            status = cam.status()
        except (OSError, ValueError) as exc:
            status = {"error": str(exc)}
        self._t_last_read = time.monotonic()
        over, highest = _gap_from_histogram(hist0, hist1)
        gap = status.get("longest_gap_ms")
        result.update({"phase": name, "phase_s": round(elapsed, 2), "longest_gap_ms": gap,
                       "fps_out_after": status.get("fps_out"),
                       "longest_gap_frames": None if gap is None else round(gap / FRAME_MS, 2),
                       "gap_window_covers_phase": elapsed + 3.0 <= 10.0,
                       "intervals_over_1.5_frames": over,
                       "longest_interval_bucket_ms": highest})
        self.results.append(result)
        print(json.dumps(result), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemon", action="store_true", help="attack `livecam daemon`")
    parser.add_argument("--json", type=Path, default=Path("out/attack_api.json"))
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 20000), hard))
    with tempfile.TemporaryDirectory() as tmp:
        cam = Livecam(args.daemon, Path(tmp))
        phases = Phases(cam)
        try:
            time.sleep(3.0)  # past start-up
            phases.run("quiet (baseline)", lambda: (time.sleep(5), {})[1])
            phases.run("200 concurrent POSTs", lambda: concurrent(cam))
            phases.run("3,000 idle sockets", lambda: idle_sockets(cam))
            for header, chunked in (("Content-Length: 209715200", False),
                                    ("Content-Length: -1", False),
                                    ("Transfer-Encoding: chunked", True)):
                phases.run(f"200 MB body, no token ({header})",
                           lambda h=header, c=chunked: big_body(cam, h, chunked=c))
        finally:
            # the daemon stops on SIGTERM; `livecam run` on Ctrl-C
            exit_s = cam.stop(signal.SIGTERM if args.daemon else signal.SIGINT)
            returncode = cam.proc.returncode
    results = phases.results

    def show(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    print(f"\n{'phase':50} {'gap ms':>7} {'frames':>6} {'>1.5f':>5} {'bucket':>6}  result")
    for r in results:
        extra = {k: v for k, v in r.items() if k not in (
            "phase", "phase_s", "longest_gap_ms", "longest_gap_frames",
            "longest_interval_bucket_ms", "intervals_over_1.5_frames", "gap_window_covers_phase",
            "header")}
        print(f"{r['phase']:50} {show(r['longest_gap_ms'], '7.1f')} "
              f"{show(r['longest_gap_frames'], '6.2f')} "
              f"{show(r['intervals_over_1.5_frames'], '5d')} "
              f"{show(r['longest_interval_bucket_ms'], '6.1f')}  {json.dumps(extra)}")
    print(f"stop ({'SIGTERM' if args.daemon else 'SIGINT'}): exit {returncode} after "
          f"{exit_s:.2f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"mode": "daemon" if args.daemon else "run",
                                     "fps": FPS, "phases": results,
                                     "sigterm_exit_s": round(exit_s, 3),
                                     "exit_code": returncode}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

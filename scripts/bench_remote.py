"""Glass-to-glass latency and fps of `livecam serve` sessions, measured from outside.

Starts `livecam serve` (a subprocess, as a user runs it; its own config/data dirs under
--work; the same set-up as the tests, :mod:`tests.helpers.whip_session`), adds a user,
then runs N real aiortc WHIP clients at once. Each sends a clip whose
frames carry their index in a bar code (the leak clip ``still_2``, 1280x720, two real faces;
``--size`` scales it, which drops the code's width below what survives VP8 under 640 px),
looped at --fps, and reads back which input each received frame shows: latency = received −
last sent of that index, on one clock. The ``srv`` columns are the server's own part, from
its status lines (every 5 s a stream; medians of those logged during the run): capture→sink
p50 and p99 of its pipeline (analysis and swap, from the decoded camera frame to the hand-over
to the encoder) and its CPU ms a frame; the rest of glass-to-glass is the transport (the
client's encode, aiortc both ways, the server's decode and encode, the client's decode).
Prints a table and writes JSON.

    python -m scripts.bench_remote --sessions 1 2 --seconds 20
    python -m scripts.bench_remote --sessions 1 --no-swap     # transport only (passthrough)
    python -m scripts.bench_remote --gpu --photos DIR --sessions 1 4 8 16   # a GPU machine

``--gpu``: the server runs the neural swap on the GPU pipeline with the stand-in models (the
inswapper-sized generator of ``scripts/gpu_harness.py``, installed under the work folder), the
identity from ``--photos``' ``astronaut.png``; the clients run in this process as before.

``--thin``: the thin client's CPU instead. Writes the clip as raw yuv420p frames (a Y4M file,
converted from BGR by OpenCV) and runs `livecam run --input file:CLIP.y4m --remote URL
--output null` (a subprocess, as a user runs it; the file looped at its 30 fps, 1280x720)
against the server; once swapped frames come back, samples the client's and the server's
process CPU (``/proc``, Linux) over --seconds: % of one core and ms per camera frame, beside
what reading the same file to BGR costs alone, and the median wait of the client's last 100
camera frames between reaching its WHIP feed and going to the encoder (``send_wait_ms`` of
its status; ``repeats_sent``: frames it sent again). ``--client-set KEY=VALUE``: a setting
of the client. Raw frames, because a camera delivers raw frames: a webcam gives YUYV or
NV12 (or MJPEG) that its driver's reader converts to BGR, about 0.6 ms at 720p for YUYV
through OpenCV, against 0.7 ms for this file's read and conversion. A coded file (H.264,
what this bench fed before) cost the client 7.8 ms of decoding per frame that no camera
has, a third of what was measured. The client's reader copies each yuv420p frame's planes
out as it reads it and the encoder takes them as they are (no conversion from BGR).

    python -m scripts.bench_remote --thin --no-swap --seconds 20   # the most frames back
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.leak_clips import SIZE, LeakClip, leak_clips, read_index
from tests.helpers.whip_session import (
    Server,
    looped_session,
    start_serve,
    start_thin_client,
    wait_for,
)


async def _one(url: str, token: str, frames: list[np.ndarray], fps: float, seconds: float
               ) -> dict[str, Any]:
    sent_at: dict[int, float] = {}
    index_of = {id(f): i for i, f in enumerate(frames)}

    def on_sent(image: np.ndarray) -> None:
        sent_at[index_of[id(image)]] = time.monotonic()

    latencies: list[float] = []
    received = new = 0
    last: int | None = None
    t_first: float | None = None
    t_connect = time.monotonic()
    async with looped_session(url, token, frames, fps=fps, timeout_s=120,
                              on_sent=on_sent) as client:
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


#: The server's status line (every 5 s a stream): capture→sink latency and CPU a frame.
_STATUS = re.compile(r"latency p50\s+([0-9.]+) ms p99\s+([0-9.]+) ms.*?cpu\s+([0-9.]+) ms/frame")


def _server_figures(log_text: str) -> dict[str, float | None]:
    """The medians of the server's status lines in ``log_text`` (its streams' capture→sink
    p50 and p99 and CPU ms a frame: the pipeline inside the server, without the transport);
    None without a line."""
    found = [tuple(map(float, m.groups())) for m in _STATUS.finditer(log_text)]
    if not found:
        return {"server_p50_ms": None, "server_p99_ms": None, "server_cpu_ms_per_frame": None}
    p50, p99, cpu = (float(np.median(column)) for column in zip(*found, strict=True))
    return {"server_p50_ms": p50, "server_p99_ms": p99, "server_cpu_ms_per_frame": cpu}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_raw_clip(clip: LeakClip, path: Path) -> None:
    """``clip``'s frames as raw yuv420p in a Y4M file (BT.601 limited range, converted by
    OpenCV as the client's encoder input is): what a camera hands its reader, uncoded."""
    import av
    import cv2

    with av.open(str(path), "w", format="yuv4mpegpipe") as container:
        stream = container.add_stream("wrapped_avframe", rate=30)
        stream.width, stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        for image, _ in clip.frames():
            planes = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420)
            for packet in stream.encode(av.VideoFrame.from_ndarray(planes, format="yuv420p")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def _decode_cpu_ms(clip: Path, frames: int = 150) -> float:
    """CPU ms per frame to read ``clip`` to BGR in this process (the file input's share)."""
    import av

    t0 = time.process_time()
    n = 0
    with av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            frame.to_ndarray(format="bgr24")
            n += 1
            if n == frames:
                break
    return (time.process_time() - t0) * 1000 / max(1, n)


def _thin(server: Server, work: Path, seconds: float, fps: float,
          settings: list[str]) -> dict[str, Any]:
    """One thin client against ``server`` (``settings``: more ``--set`` of the client): its
    CPU and the server's over ``seconds``."""
    clip = work / "clip.y4m"
    write_raw_clip(leak_clips()["still_2"], clip)
    client = start_thin_client(work, server.url, "--input", f"file:{clip}", "--output",
                               "null", "--set", "advanced.capture.loop=true",
                               "--set", f"capture.fps={fps:g}", "--set", "control.hotkeys=false",
                               *(a for kv in settings for a in ("--set", kv)),
                               token=server.tokens["bench"])
    try:
        wait_for("swapped frames came back", lambda: (client.remote().get("last_frame_age_s")
                                                     is not None), client.log)
        time.sleep(2.0)  # past the first frames' set-up
        before = client.status()
        c0, s0, t0 = _cpu_s(client.proc.pid), _cpu_s(server.proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, s1, t1 = _cpu_s(client.proc.pid), _cpu_s(server.proc.pid), time.monotonic()
        after = client.status()
    finally:
        client.kill()
    wall = t1 - t0
    # the camera's rate over the two status documents' own times: each `livecam ctl` call
    # takes a while, which the CPU samples between them do not span
    fps = (after["frames"]["captured"] - before["frames"]["captured"]) / max(
        1e-9, after["uptime_s"] - before["uptime_s"])
    remote = after["remote_engines"]["remote"]
    read_ms = _decode_cpu_ms(clip)
    clip.unlink()  # 83 MB of raw frames, made again by the next run
    return {"client_cpu_percent": round((c1 - c0) / wall * 100, 1),
            "client_ms_per_frame": round((c1 - c0) * 1000 / max(1e-9, fps * wall), 2),
            "server_cpu_percent": round((s1 - s0) / wall * 100, 1),
            "camera_fps": round(fps, 1),
            "input_read_ms_per_frame": round(read_ms, 2),
            "send_wait_ms": remote.get("send_wait_ms"),
            "repeats_sent": remote.get("repeats_sent"),
            "covered_frames": remote["covered_frames"], "state": remote["state"],
            "seconds": round(wall, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--no-swap", action="store_true", help="no identity: passthrough")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--thin", action="store_true",
                        help="the thin client's CPU (`livecam run --remote`), not latency")
    parser.add_argument("--client-set", action="append", default=[], metavar="KEY=VALUE",
                        help="--thin: a setting of the thin client (repeatable)")
    parser.add_argument("--gpu", action="store_true",
                        help="the server runs the neural swap on the GPU pipeline with the "
                             "stand-in models (scripts/gpu_harness.py), not the classic swap")
    parser.add_argument("--photos", type=Path, default=None,
                        help="--gpu: a folder with astronaut.png, the identity's photo (a GPU "
                             "machine without skimage: scripts/device/export_bench_assets.py)")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                        help="a setting of the server (repeatable)")
    parser.add_argument("--json", type=Path, default=Path("bench_remote.json"))
    args = parser.parse_args()
    # the servers' and clients' folders: the one given, or one removed at the end
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as scratch:
        work = args.work or Path(scratch)
        if args.thin:
            _main_thin(args, work)
        else:
            _main_sessions(args, work)


def _main_sessions(args: argparse.Namespace, work: Path) -> None:
    frames = [f for f, _ in leak_clips()["still_2"].frames()]
    settings = ["advanced.pipeline.status_interval_s=5", *args.sets]
    photo = None
    if args.gpu:
        from scripts.gpu_harness import neural_settings

        settings = [*neural_settings(work / "gpu"), *settings]
        photo = args.photos / "astronaut.png" if args.photos else None
    server = start_serve(work / "server", max_sessions=max(args.sessions),
                         identity=None if args.no_swap else "astro", users=("bench",),
                         settings=settings, start_timeout_s=300, photo=photo)
    url, token, log = server.url, server.tokens["bench"], server.log
    rows: list[dict[str, Any]] = []
    try:
        for n in args.sessions:
            async def run_n(n: int = n) -> list[dict[str, Any]]:
                return list(await asyncio.gather(*(_one(url, token, frames, args.fps,
                                                        args.seconds) for _ in range(n))))

            logged = len(log.read_text())
            results = asyncio.run(run_n())
            time.sleep(2.0)  # the sessions' streams removed before the next count
            server_side = _server_figures(log.read_text()[logged:])
            for k, result in enumerate(results):
                rows.append({"sessions": n, "session": k, **result, **server_side})
    finally:
        server.stop()
    print(f"{'sessions':>8} {'#':>2} {'first s':>8} {'recv fps':>8} {'new fps':>8} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'srv p50':>8} {'srv p99':>8} {'srv cpu':>8}")
    for r in rows:
        print(f"{r['sessions']:>8} {r['session']:>2} {r['first_frame_s']:>8} "
              f"{r['received_fps']:>8} {r['new_fps']:>8} {r['latency_p50_ms']:>8} "
              f"{r['latency_p99_ms']:>8} {r['server_p50_ms']!s:>8} "
              f"{r['server_p99_ms']!s:>8} {r['server_cpu_ms_per_frame']!s:>8}")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    swap = "none" if args.no_swap else "neural (stand-in), GPU" if args.gpu else "classic"
    doc = {"command": " ".join(sys.argv), "swap": swap, "settings": settings,
           "size": "1280x720", "fps": args.fps, "host": platform.node(),
           "cpus": os.cpu_count(), "loadavg": load, "rows": rows,
           "server_log_tail": log.read_text()[-3000:]}
    args.json.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.json} (load average {load[0]:.1f} on {os.cpu_count()} cores)")


def _main_thin(args: argparse.Namespace, work: Path) -> None:
    server = start_serve(work / "server", max_sessions=1,
                         identity=None if args.no_swap else "astro", users=("bench",),
                         start_timeout_s=180)
    try:
        row = _thin(server, work, args.seconds, args.fps, args.client_set)
    finally:
        server.stop()
    load = os.getloadavg()
    print(f"{'client % core':>13} {'client ms/frame':>15} {'input read ms':>13} "
          f"{'camera fps':>10} {'send wait ms':>12} {'server % core':>13}")
    print(f"{row['client_cpu_percent']:>13} {row['client_ms_per_frame']:>15} "
          f"{row['input_read_ms_per_frame']:>13} {row['camera_fps']:>10} "
          f"{row['send_wait_ms']!s:>12} {row['server_cpu_percent']:>13}")
    doc = {"command": " ".join(sys.argv), "swap": "none" if args.no_swap else "classic",
           "size": "1280x720", "fps": args.fps, "host": platform.node(),
           "cpus": os.cpu_count(), "loadavg": load, "thin": row}
    args.json.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.json} (load average {load[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()

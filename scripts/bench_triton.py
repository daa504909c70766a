"""Benchmark: N livecam client streams against one Triton server, and the in-process path.

What it runs (the products, not a reimplementation):
1. Stand-in models: inswapper_128-shaped (``--model-size full``: the real 138 M-parameter
   layout) and w600k_r50-shaped ONNX files, installed with manifests accepting their sha256
   (the real weights are downloads).
2. A 1920x1080 scene with ``--faces`` copies of a real photo's face (skimage's astronaut).
3. ``livecam engines serve`` (Triton; torch with CUDA graphs on a GPU, onnxruntime on a CPU),
   waited on until it prints ``ready:``.
4. One request through the triton engine (the served model answers, with rows: a server
   that answers empty fails here, in one line, before any stream starts).
5. For each in-flight depth F in ``--in-flight`` and each N in ``--streams``: N processes of
   ``scripts/bench_triton_stream.py``, each a ``livecam run --input image:scene --output
   null`` at ``--fps`` in live mode with ``engine.backend=triton`` and
   ``advanced.engine.triton_in_flight=F``; once all N run, they warm up and measure over the same
   ``--seconds``. Meanwhile CPU and GPU utilisation are sampled and Triton's /metrics read
   before and after.
6. Unless ``--skip-inprocess`` (first, so it is there even when the budget runs out): one
   stream of the same scene in process (``engine.backend`` auto: the GPU pipeline on a CUDA
   GPU), the baseline for the remote overhead.

Reported per (F, N): streams that held the frame rate (new frames swapped, not repeats),
faces/s served, mean Triton batch, request p50/p99 (client round trip), most requests in
flight in a stream, capture->sink p50/p99 (median and worst stream), bytes per face per frame
on the wire, CPU and GPU utilisation. Prints a table and writes JSON (``--out``, rewritten
after every run). ``--budget-s`` skips the runs that would not end in time (a device call
has 600 s), and says so in the JSON.

    python -m scripts.bench_triton --streams 1,8,16,32 --in-flight 3 --seconds 15 \
        --out bench_triton.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def build_scene(root: Path, faces: int, size: tuple[int, int]) -> tuple[Path, Path]:
    """A W x H scene with ``faces`` astronaut faces side by side; (scene, source photo). The
    astronaut from scikit-image, or ``$LIVECAM_TEST_PHOTOS/astronaut.png`` where it is not
    installed (the GPU machine)."""
    import cv2

    try:
        from skimage.data import astronaut

        photo_bgr = np.ascontiguousarray(astronaut()[:, :, ::-1])
    except ImportError:
        path = Path(os.environ.get("LIVECAM_TEST_PHOTOS", ".")) / "astronaut.png"
        photo_bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if photo_bgr is None:
            raise SystemExit(f"scikit-image is not installed and {path} is not there: set "
                             "LIVECAM_TEST_PHOTOS to a folder with astronaut.png") from None
    w, h = size
    scene = np.full((h, w, 3), 110, np.uint8)
    side = min(h, w // faces)
    tile = cv2.resize(photo_bgr, (side, side), interpolation=cv2.INTER_AREA)
    for i in range(faces):
        x0 = i * (w // faces) + (w // faces - side) // 2
        scene[(h - side) // 2:(h - side) // 2 + side, x0:x0 + side] = tile
    scene_path, photo_path = root / "scene.png", root / "source.png"
    cv2.imwrite(str(scene_path), scene)
    cv2.imwrite(str(photo_path), photo_bgr)
    return scene_path, photo_path


def triton_metrics(port: int) -> dict[str, float]:
    """Triton's inference counters summed over models (its Prometheus text)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for name in ("nv_inference_count", "nv_inference_exec_count",
                 "nv_inference_request_success", "nv_inference_compute_infer_duration_us",
                 "nv_inference_queue_duration_us"):
        values = re.findall(rf'^{name}{{model="inswapper_128"[^}}]*}} ([0-9.e+]+)$', text,
                            re.M)
        out[name] = sum(float(v) for v in values)
    return out


class Sampler:
    """CPU (all cores) and GPU utilisation once a second, in a thread."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.gpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        psutil.cpu_percent()
        while not self._stop.wait(1.0):
            self.cpu.append(psutil.cpu_percent())
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu",
                                      "--format=csv,noheader,nounits"], capture_output=True,
                                     text=True, timeout=5).stdout.split()
                self.gpu.append(float(np.mean([float(v) for v in out]))) if out else None
            except (OSError, subprocess.SubprocessError, ValueError):
                pass

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def run_streams(n: int, run_args: list[str], args: argparse.Namespace,
                env: dict[str, str], logs: Path) -> list[dict[str, Any]]:
    """N stream processes started together; each measures once all N are running (their
    logs in ``logs``); one result per stream (``error`` where one failed)."""
    cmd = [sys.executable, "-m", "scripts.bench_triton_stream", "--seconds",
           str(args.seconds), "--warmup-s", str(args.warmup_s), "--wait-go", "--", *run_args]
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    for k in range(n):
        with (logs / f"stream{k}.log").open("w") as err:
            procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=err, text=True, env=env, cwd=REPO))
    deadline = time.monotonic() + args.start_timeout_s
    for p in procs:  # stdout carries only "ready" and the result line: it never fills up
        assert p.stdout is not None
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line or line.strip() == "ready":
                break
    for p in procs:
        with contextlib.suppress(OSError):  # one that died already reports below
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.close()
        p.stdin = None  # communicate() below must not flush it again
    results = []
    for k, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=args.seconds + args.warmup_s + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if p.returncode != 0 or not lines:
            tail = (logs / f"stream{k}.log").read_text(errors="replace").strip().splitlines()
            results.append({"error": (tail or ["no output"])[-1][:300]})
        else:
            results.append(json.loads(lines[-1]))
    return results


def probe_request(url: str) -> dict[str, Any]:
    """One inswapper request through livecam's triton engine: its round trip and whether the
    rows came back finite (``error`` otherwise)."""
    from livecam.engines.triton_client import TritonEngine

    engine = TritonEngine("inswapper_128", urls=[url], timeout_ms=60000,
                          connect_timeout_s=30.0)
    feeds = {"target": np.random.default_rng(0).random((2, 3, 128, 128), dtype=np.float32),
             "source": np.random.default_rng(1).standard_normal((2, 512)).astype(np.float32)}
    try:
        with engine:
            t0 = time.perf_counter()
            out = engine.run(feeds)["output"]
            rtt_ms = (time.perf_counter() - t0) * 1e3
    except Exception as exc:  # the report says what went wrong, the baseline still runs
        return {"error": f"{type(exc).__name__}: {exc}"[:400]}
    ok = out.shape == (2, 3, 128, 128) and bool(np.isfinite(out).all())
    return {"shape": list(out.shape), "finite": ok, "rtt_ms": round(rtt_ms, 1),
            **({} if ok else {"error": f"bad output {out.shape}"})}


def summarise(n: int, streams: list[dict[str, Any]], before: dict[str, float],
              after: dict[str, float], sampler: Sampler, args: argparse.Namespace
              ) -> dict[str, Any]:
    ok = [s for s in streams if "error" not in s]
    p99 = [s["latency_p99_ms"] for s in ok if s["latency_p99_ms"] is not None]
    p50 = [s["latency_p50_ms"] for s in ok if s["latency_p50_ms"] is not None]
    remote = [s["remote"] for s in ok if s.get("remote")]
    rows = sum(r["rows_delta"] for r in remote)
    execs = after["nv_inference_exec_count"] - before["nv_inference_exec_count"]
    infers = after["nv_inference_count"] - before["nv_inference_count"]
    return {
        "streams": n, "in_flight": args.in_flight_now,
        "errors": [s["error"] for s in streams if "error" in s],
        "held_fps": sum(1 for s in ok if s["fps_processed"] >= 0.95 * args.fps),
        "fps_processed_min": min((s["fps_processed"] for s in ok), default=None),
        "faces_per_s": round(rows / args.seconds, 1) if remote else None,
        "triton_mean_batch": round(infers / execs, 2) if execs else None,
        "request_p50_ms": float(np.median([r["request_ms"]["p50"] for r in remote]))
        if remote else None,
        "request_p99_ms": float(np.max([r["request_ms"]["p99"] for r in remote]))
        if remote else None,
        "latency_p50_ms_median": float(np.median(p50)) if p50 else None,
        "latency_p99_ms_median": float(np.median(p99)) if p99 else None,
        "latency_p99_ms_worst": float(np.max(p99)) if p99 else None,
        "bytes_up_per_face": round(sum(r["bytes_sent_delta"] for r in remote) / rows)
        if rows else None,
        "bytes_down_per_face": round(sum(r["bytes_received_delta"] for r in remote) / rows)
        if rows else None,
        "in_flight_max": max((r.get("in_flight_max", 0) for r in remote), default=None),
        "failures": sum(r["failures_delta"] for r in remote),
        "stage_errors": sum(s["stage_errors"] for s in ok),
        "cpu_percent": round(float(np.mean(sampler.cpu)), 1) if sampler.cpu else None,
        "gpu_percent": round(float(np.mean(sampler.gpu)), 1) if sampler.gpu else None,
        "per_stream": streams,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1,8,16,32")
    parser.add_argument("--in-flight", default="3",
                        help="advanced.engine.triton_in_flight values to run (each with every N)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=8.0)
    parser.add_argument("--start-timeout-s", type=float, default=180.0,
                        help="longest wait for N streams to be running")
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="skip runs that would end later than this after the start (0: "
                        "no limit); a device call has 600 s")
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--faces", type=int, default=1, help="faces per frame")
    parser.add_argument("--model-size", default="full", choices=("full", "small"))
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--max-queue-delay-us", type=int, default=1000)
    parser.add_argument("--timeout-ms", type=int, default=1000)
    parser.add_argument("--skip-inprocess", action="store_true")
    parser.add_argument("--work", default="/tmp/bench_triton")
    parser.add_argument("--out", default="bench_triton.json")
    args = parser.parse_args()
    t_start = time.monotonic()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"), XDG_DATA_HOME=str(work / "data"),
               XDG_CONFIG_HOME=str(work / "config"), PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    from tests.helpers.standins import install_standin_models

    models_dir, manifests_dir = install_standin_models(work / "standins", size=args.model_size)
    width, height = (int(v) for v in args.size.split("x"))
    scene, photo = build_scene(work, args.faces, (width, height))
    print(f"models and scene ready in {time.perf_counter() - t0:.0f} s", flush=True)
    sets = [f"advanced.models.dir={models_dir}", f"advanced.models.manifests_dir={manifests_dir}",
            "control.api=false", "control.hotkeys=false", "advanced.pipeline.status_interval_s=0",
            "advanced.pipeline.realtime=true", f"capture.fps={args.fps}", f"output.fps={args.fps}",
            "swap.mode=neural"]
    base = ["--input", f"image:{scene}", "--output", "null", "--source", str(photo)]
    results: dict[str, Any] = {"args": vars(args), "runs": [], "skipped": []}

    def save() -> None:
        Path(args.out).write_text(json.dumps(results, indent=1))

    def fits(n: int) -> bool:
        # a rough upper bound: the streams' start, warm-up, window and stop
        need_s = args.warmup_s + args.seconds + 20 + 1.5 * n
        return not args.budget_s or time.monotonic() - t_start + need_s <= args.budget_s

    if not args.skip_inprocess:
        local_args = [*base, *[x for s in sets for x in ("--set", s)]]
        with Sampler() as sampler:
            streams = run_streams(1, local_args, args, env, work / "logs" / "inprocess")
        results["inprocess"] = {"stream": streams[0], "cpu_percent": sampler.cpu,
                                "gpu_percent": sampler.gpu}
        print("in process:", json.dumps(streams[0])[:600], flush=True)
        save()
    grpc, http, metrics = 18501, 18500, 18502
    serve_cmd = [sys.executable, "-m", "livecam.cli", "engines", "serve", "--grpc-port",
                 str(grpc), "--http-port", str(http), "--metrics-port", str(metrics),
                 "--instances", str(args.instances), "--max-batch", str(args.max_batch),
                 "--max-queue-delay-us", str(args.max_queue_delay_us),
                 *[x for s in sets[:2] for x in ("--set", s)]]
    t0 = time.perf_counter()
    server = subprocess.Popen(serve_cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            print("  serve:", line.rstrip(), flush=True)
            if line.startswith("ready:"):
                break
        else:
            results["serve_error"] = "livecam engines serve ended before it was ready"
            raise SystemExit(results["serve_error"])
        results["serve_ready_s"] = round(time.perf_counter() - t0, 1)
        results["probe"] = probe_request(f"127.0.0.1:{grpc}")
        print("probe:", json.dumps(results["probe"]), flush=True)
        save()
        if "error" in results["probe"]:
            raise SystemExit(f"the served model does not answer: {results['probe']['error']}")
        for depth in (int(v) for v in args.in_flight.split(",")):
            remote_sets = [*sets, "engine.backend=triton",
                           f"advanced.engine.triton_urls=[127.0.0.1:{grpc}]",
                           f"advanced.engine.triton_timeout_ms={args.timeout_ms}",
                           f"advanced.engine.triton_in_flight={depth}"]
            run_args = [*base, *[x for s in remote_sets for x in ("--set", s)]]
            args.in_flight_now = depth
            for n in (int(v) for v in args.streams.split(",")):
                if not fits(n):
                    results["skipped"].append({"streams": n, "in_flight": depth,
                                               "why": "--budget-s"})
                    print(f"skipped {n} streams at in-flight {depth}: over --budget-s",
                          flush=True)
                    continue
                before = triton_metrics(metrics)
                with Sampler() as sampler:
                    streams = run_streams(n, run_args, args, env,
                                          work / "logs" / f"f{depth}_n{n}")
                summary = summarise(n, streams, before, triton_metrics(metrics), sampler, args)
                results["runs"].append(summary)
                print(json.dumps({k: v for k, v in summary.items() if k != "per_stream"}),
                      flush=True)
                save()
    finally:
        server.terminate()
        server.wait(60)
        save()
        print_table(results)


def print_table(results: dict[str, Any]) -> None:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)

    head = ("streams", "in flight", "held fps", "faces/s", "batch", "req p50", "req p99",
            "max in flight", "lat p50", "lat p99 med", "lat p99 worst", "B up/face",
            "B down/face", "fail", "cpu%", "gpu%")
    print(" | ".join(head))
    for r in results["runs"]:
        print(" | ".join(f(r[k]) for k in (
            "streams", "in_flight", "held_fps", "faces_per_s", "triton_mean_batch",
            "request_p50_ms", "request_p99_ms", "in_flight_max", "latency_p50_ms_median",
            "latency_p99_ms_median",
            "latency_p99_ms_worst", "bytes_up_per_face", "bytes_down_per_face", "failures",
            "cpu_percent", "gpu_percent")))
        if r["errors"]:
            print("   errors:", "; ".join(sorted(set(r["errors"])))[:400])
    local = results.get("inprocess", {}).get("stream")
    if local:
        print("in process:", json.dumps({k: local.get(k) for k in (
            "fps_processed", "latency_p50_ms", "latency_p99_ms", "stage_p50_ms", "error")}))


if __name__ == "__main__":
    main()

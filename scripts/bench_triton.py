"""Benchmark: N livecam client streams against one Triton server, and the in-process path.

What it runs (the products, not a reimplementation):
1. Stand-in models: inswapper_128-shaped (``--model-size full``: the real 138 M-parameter
   layout) and w600k_r50-shaped ONNX files, installed with manifests accepting their sha256
   (the real weights are downloads).
2. A 1920x1080 scene with ``--faces`` copies of a real photo's face (skimage's astronaut).
3. ``livecam engines serve`` (Triton; torch with CUDA graphs on a GPU, onnxruntime on a CPU),
   waited on until it prints ``ready:``.
4. For each N in ``--streams``: N processes of ``scripts/bench_triton_stream.py``, each a
   ``livecam run --input image:scene --output null`` at ``--fps`` in live mode with
   ``engine.backend=triton``, for ``--seconds`` after a warm-up. Meanwhile CPU and GPU
   utilisation are sampled and Triton's /metrics read before and after.
5. Unless ``--skip-inprocess``: one stream of the same scene in process (``engine.backend``
   auto: the GPU pipeline on a CUDA GPU), the baseline for the remote overhead.

Reported per N: streams that held the frame rate (new frames swapped, not repeats), faces/s
served, mean Triton batch, request
p50/p99 (client round trip), capture->sink p50/p99 (median and worst stream), bytes per face
per frame on the wire, CPU and GPU utilisation. Prints a table and writes JSON (``--out``).

    python scripts/bench_triton.py --streams 1,8,16,32 --seconds 20 --out bench_triton.json
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(REPO))


def install_models(root: Path, size: str) -> tuple[Path, Path]:
    """Stand-in models and manifests that accept them; (models_dir, manifests_dir)."""
    import yaml

    from livecam.engines.manifest import default_manifests_dir, load_manifests
    from livecam.engines.store import ModelStore, sha256_file
    from livecam.testing.standins import build_arcface, build_inswapper

    models, manifests, build = root / "models", root / "manifests", root / "build"
    for d in (models, manifests, build):
        d.mkdir(parents=True, exist_ok=True)
    built = {"inswapper_128": build_inswapper(build / "inswapper_128.onnx", batch="N",
                                              size=size),
             "w600k_r50": build_arcface(build / "w600k_r50.onnx")}
    for name, path in built.items():
        data = yaml.safe_load((default_manifests_dir() / f"{name}.yaml").read_text())
        data["sources"] = [{"url": "file:///standin", "sha256": sha256_file(path)}]
        (manifests / f"{name}.yaml").write_text(yaml.safe_dump(data))
    store = ModelStore(models, load_manifests(manifests))
    for name, path in built.items():
        store.adopt(name, path, move=True)
    return models, manifests


def build_scene(root: Path, faces: int, size: tuple[int, int]) -> tuple[Path, Path]:
    """A W x H scene with ``faces`` astronaut faces side by side; (scene, source photo)."""
    import cv2
    from skimage.data import astronaut

    photo_bgr = np.ascontiguousarray(astronaut()[:, :, ::-1])
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
                env: dict[str, str]) -> list[dict[str, Any]]:
    cmd = [sys.executable, str(REPO / "scripts" / "bench_triton_stream.py"), "--seconds",
           str(args.seconds), "--warmup-s", str(args.warmup_s), "--", *run_args]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(n)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=args.seconds + args.warmup_s + 600)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if p.returncode != 0 or not lines:
            results.append({"error": (err.strip().splitlines() or ["no output"])[-1]})
        else:
            results.append(json.loads(lines[-1]))
    return results


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
        "streams": n, "errors": [s["error"] for s in streams if "error" in s],
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
        "failures": sum(r["failures_delta"] for r in remote),
        "stage_errors": sum(s["stage_errors"] for s in ok),
        "cpu_percent": round(float(np.mean(sampler.cpu)), 1) if sampler.cpu else None,
        "gpu_percent": round(float(np.mean(sampler.gpu)), 1) if sampler.gpu else None,
        "per_stream": streams,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1,8,16,32")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=8.0)
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
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"), XDG_DATA_HOME=str(work / "data"),
               XDG_CONFIG_HOME=str(work / "config"), PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    models_dir, manifests_dir = install_models(work / "standins", args.model_size)
    width, height = (int(v) for v in args.size.split("x"))
    scene, photo = build_scene(work, args.faces, (width, height))
    print(f"models and scene ready in {time.perf_counter() - t0:.0f} s", flush=True)
    sets = [f"models.dir={models_dir}", f"models.manifests_dir={manifests_dir}",
            "control.api=false", "control.hotkeys=false", "pipeline.status_interval_s=0",
            "pipeline.realtime=true", f"capture.fps={args.fps}", f"output.fps={args.fps}",
            "swap.mode=neural"]
    base = ["--input", f"image:{scene}", "--output", "null", "--source", str(photo)]
    grpc, http, metrics = 18501, 18500, 18502
    serve_cmd = [sys.executable, "-m", "livecam.cli", "engines", "serve", "--grpc-port",
                 str(grpc), "--http-port", str(http), "--metrics-port", str(metrics),
                 "--instances", str(args.instances), "--max-batch", str(args.max_batch),
                 "--max-queue-delay-us", str(args.max_queue_delay_us),
                 *[x for s in sets[:2] for x in ("--set", s)]]
    results: dict[str, Any] = {"args": vars(args), "runs": []}
    t0 = time.perf_counter()
    server = subprocess.Popen(serve_cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            print("  serve:", line.rstrip(), flush=True)
            if line.startswith("ready:"):
                break
        else:
            raise SystemExit("livecam engines serve ended before it was ready")
        results["serve_ready_s"] = round(time.perf_counter() - t0, 1)
        remote_sets = [*sets, "engine.backend=triton", f"engine.triton_urls=[127.0.0.1:{grpc}]",
                       f"engine.triton_timeout_ms={args.timeout_ms}"]
        run_args = [*base, *[x for s in remote_sets for x in ("--set", s)]]
        for n in (int(v) for v in args.streams.split(",")):
            before = triton_metrics(metrics)
            with Sampler() as sampler:
                streams = run_streams(n, run_args, args, env)
            summary = summarise(n, streams, before, triton_metrics(metrics), sampler, args)
            results["runs"].append(summary)
            print(json.dumps({k: v for k, v in summary.items() if k != "per_stream"}),
                  flush=True)
    finally:
        server.terminate()
        server.wait(60)
    if not args.skip_inprocess:
        local_args = [*base, *[x for s in sets for x in ("--set", s)]]
        with Sampler() as sampler:
            streams = run_streams(1, local_args, args, env)
        results["inprocess"] = {"stream": streams[0], "cpu_percent": sampler.cpu,
                                "gpu_percent": sampler.gpu}
    Path(args.out).write_text(json.dumps(results, indent=1))
    print_table(results)


def print_table(results: dict[str, Any]) -> None:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)

    head = ("streams", "held fps", "faces/s", "batch", "req p50", "req p99", "lat p50",
            "lat p99 med", "lat p99 worst", "B up/face", "B down/face", "fail", "cpu%", "gpu%")
    print(" | ".join(head))
    for r in results["runs"]:
        print(" | ".join(f(r[k]) for k in (
            "streams", "held_fps", "faces_per_s", "triton_mean_batch", "request_p50_ms",
            "request_p99_ms", "latency_p50_ms_median", "latency_p99_ms_median",
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

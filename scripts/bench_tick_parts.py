#!/usr/bin/env python
"""Where a tick's GPU time goes per face, outside the generator: the swap program's parts on
N faces (one per 1080p frame, as N streams' frames in one tick) timed on the device.

Parts: ``align_crop`` (alignment, crop, network input), ``to_faces`` (the generator's output
to uint8 faces), ``paste`` (insightface's paste-back, no kept regions), ``keep_alpha`` (the
kept eyes and mouth drawn on each window) and ``paste_keep`` (the paste-back with them, what a
tick runs by default). The generator itself is timed by ``scripts/bench_compiled.py``. Each
part runs eagerly (CUDA events around it, median of ``--iters``) and captured in one CUDA
graph (as the hub replays it); with ``--compile``, also through ``torch.compile`` captured in a
graph (as ``advanced.gpu.compile_paste`` runs them); ``--profile N`` lists the top kernels of
``paste_keep`` on N faces (torch.profiler).

    python -m scripts.bench_tick_parts --device cuda --faces 1 4 8 16 --json out.json
    python -m scripts.bench_tick_parts --device cuda --faces 1 8 --compile
    python -m scripts.bench_tick_parts --device cpu --faces 1 2 --iters 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from livecam.gpupipe.swap import keep
from livecam.gpupipe.swap.align import template_tensor
from livecam.gpupipe.swap.blend import window_origins
from livecam.gpupipe.swap.neural import GpuInswapper
from livecam.gpupipe.swap.paste import insightface_paste_

FACE_PX = 280.0  # a streamer's face at 1080p, eye to eye x 2.8


class _NoEngine:
    """The generator is not timed here (GpuInswapper only reads its specs at open)."""

    inputs: tuple[Any, ...] = ()
    outputs: tuple[Any, ...] = ()


def _scene(n: int, device: torch.device, height: int, width: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(n)
    frames = torch.randint(0, 255, (n, height, width, 3), generator=gen, dtype=torch.uint8)
    template = template_tensor(128, "arcface_128").numpy()
    centre = np.array([width / 2, height / 2], np.float32)
    kps = (template - 64.0) * (FACE_PX / 128.0) + centre  # (5, 2)
    angles = np.linspace(-0.3, 0.3, n)
    rows = []
    for a in angles:
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]], np.float32)
        rows.append((kps - centre) @ rot.T + centre)
    five = torch.from_numpy(np.stack(rows).astype(np.float32))
    # kept loops: ellipses around both eyes and the mouth
    t = np.linspace(0, 2 * np.pi, keep.POINTS, endpoint=False)
    loops = np.zeros((n, keep.LOOPS, keep.POINTS, 2), np.float32)
    for i in range(n):
        eye_r, eye_l, _, m_l, m_r = rows[i]
        for k, (c, rx, ry) in enumerate(((eye_r, 22, 9), (eye_l, 22, 9),
                                         ((m_l + m_r) / 2, 35, 12))):
            loops[i, k, :, 0] = c[0] + rx * np.cos(t)
            loops[i, k, :, 1] = c[1] + ry * np.sin(t)
    return {"frames": frames.to(device), "index": torch.arange(n).to(device),
            "kps": five.to(device), "valid": torch.ones(n, dtype=torch.bool).to(device),
            "keep_xy": torch.from_numpy(loops).to(device),
            "keep_soft": torch.full((n,), 0.008 * FACE_PX).to(device),
            "pred": torch.rand((n, 3, 128, 128), generator=gen).to(device)}


def _parts(sw: GpuInswapper, s: dict[str, torch.Tensor], window_px: int
           ) -> dict[str, Callable[[], Any]]:
    matrices, _ = sw.crops(s["frames"], s["index"], s["kps"])
    faces = sw.to_faces(s["pred"])
    loops = keep.KeepLoops(s["keep_xy"], s["keep_soft"])
    origin = window_origins(matrices, 128, window_px, s["frames"].shape[1], s["frames"].shape[2])
    return {
        "align_crop": lambda: sw.blob(sw.crops(s["frames"], s["index"], s["kps"])[1]),
        "to_faces": lambda: sw.to_faces(s["pred"]),
        "paste": lambda: insightface_paste_(s["frames"], s["index"], faces, matrices,
                                            s["valid"], window_px=window_px),
        "keep_alpha": lambda: keep.kept_alpha(loops, origin, window_px),
        "oval_alpha": lambda: keep.oval_alpha(loops, origin, window_px),
        "paste_keep": lambda: insightface_paste_(s["frames"], s["index"], faces, matrices,
                                                 s["valid"], window_px=window_px, keep=loops),
    }


def _time_eager(fn: Callable[[], Any], device: torch.device, iters: int) -> float:
    fn()
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _time_graph(fn: Callable[[], Any], iters: int) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return _time_eager(graph.replay, torch.device("cuda"), iters)


def _profile(fn: Callable[[], Any], top: int) -> list[dict[str, Any]]:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    rows = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:top]
    return [{"kernel": e.key[:90], "calls": e.count, "ms_per_run": e.device_time_total / 5e3}
            for e in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--faces", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--window-px", type=int, default=640)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--size", default="1920x1080", help="frame WxH")
    parser.add_argument("--profile", type=int, default=0, help="faces for the kernel table")
    parser.add_argument("--compile", action="store_true",
                        help="also time each part through torch.compile (in a graph on CUDA)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    width, height = (int(v) for v in args.size.split("x"))
    sw = GpuInswapper(_NoEngine(), window_px=args.window_px)
    sw.template = template_tensor(128, "arcface_128", device=device)
    rows: list[dict[str, Any]] = []
    for n in args.faces:
        parts = _parts(sw, _scene(n, device, height, width), args.window_px)
        for name, fn in parts.items():
            row: dict[str, Any] = {"faces": n, "part": name,
                                   "eager_ms": _time_eager(fn, device, args.iters)}
            if device.type == "cuda":
                row["graph_ms"] = _time_graph(fn, args.iters)
            if args.compile:
                compiled = torch.compile(fn, dynamic=False)
                t0 = time.perf_counter()
                compiled()
                row["compile_s"] = time.perf_counter() - t0
                row["compiled_ms"] = (_time_graph(compiled, args.iters) if device.type == "cuda"
                                      else _time_eager(compiled, device, args.iters))
            row["per_face_ms"] = row.get("graph_ms", row["eager_ms"]) / n
            rows.append(row)
            print(f"{n:>3} faces  {name:<11} eager {row['eager_ms']:8.3f} ms  graph "
                  f"{row.get('graph_ms', float('nan')):8.3f} ms  per face "
                  f"{row['per_face_ms']:7.3f} ms  compiled "
                  f"{row.get('compiled_ms', float('nan')):8.3f} ms "
                  f"({row.get('compile_s', float('nan')):.1f} s to compile)", flush=True)
    kernels: list[dict[str, Any]] = []
    if args.profile and device.type == "cuda":
        parts = _parts(sw, _scene(args.profile, device, height, width), args.window_px)
        kernels = _profile(parts["paste_keep"], 15)
        print(f"\ntop kernels of paste_keep, {args.profile} faces (ms per run):")
        for k in kernels:
            print(f"  {k['ms_per_run']:8.3f}  x{k['calls']:<4} {k['kernel']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": str(device), "window_px": args.window_px, "size": args.size,
                       "rows": rows, "kernels": kernels,
                       "torch": torch.__version__}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

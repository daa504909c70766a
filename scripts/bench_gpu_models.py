#!/usr/bin/env python
"""Speed of the torch ports of MediaPipe's BlazeFace and face mesh (livecam.gpupipe.networks).

For each batch size (frames per call; the mesh gets one face per frame), dtype and mode it
times: the detector alone ("detect-short", "detect-full"), the mesh alone on fixed ROIs
("mesh") and detector + ROI + mesh ("short+mesh"). Modes: "eager", and on CUDA "graph" (the
same call captured once in a CUDA graph and replayed). Frames are a real face photo on a
synthetic canvas (content does not change the work: every shape is static).

    python -m scripts.bench_gpu_models --device cpu --iters 3 --batches 1 4
    python -m scripts.bench_gpu_models --device cuda --dtypes fp32 fp16 \\
        --models-dir /path/to/mediapipe/modules --json out/bench_gpu_models.json

``--models-dir``: a copy of mediapipe's ``modules`` folder (only face_detection/*.tflite and
face_landmark/face_landmark.tflite are read), for machines without mediapipe installed.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from livecam.gpupipe.networks.facemesh import FaceRois, rois_from_detections
from livecam.gpupipe.networks.models import load_blazeface, load_face_mesh

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def _face_photo_bgr(path: Path | None) -> np.ndarray:
    if path is not None:
        import cv2

        image = cv2.imread(str(path))
        if image is None:
            raise SystemExit(f"cannot read --image {path}")
        return np.ascontiguousarray(image)
    try:
        from skimage import data

        return np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    except ImportError:
        pass
    try:
        from insightface.data import get_image

        return np.ascontiguousarray(get_image("t1"))
    except ImportError:
        pass
    # No photo package here (e.g. the GPU box): timings are unaffected, detections are not.
    ramp = np.linspace(0, 255, 512, dtype=np.float32)
    return np.stack([np.add.outer(ramp, ramp) / 2] * 3, -1).astype(np.uint8)


def _frames(photo_bgr: np.ndarray, width: int, height: int, batch: int) -> np.ndarray:
    import cv2

    canvas = np.full((height, width, 3), 90, np.uint8)
    side = min(height, width) // 2
    face = cv2.resize(photo_bgr, (side, side))
    y0, x0 = (height - side) // 2, (width - side) // 2
    canvas[y0:y0 + side, x0:x0 + side] = face
    return np.repeat(canvas[None], batch, axis=0)


def _time(fn: Callable[[], Any], device: torch.device, warmup: int, iters: int) -> list[float]:
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    times_ms = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times_ms.append((time.perf_counter_ns() - t0) / 1e6)
    return times_ms


def _graphed(fn: Callable[[], Any], warmup: int) -> Callable[[], Any]:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(max(warmup, 3)):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    return graph.replay


def _kernels(fn: Callable[[], Any]) -> tuple[int, float]:
    """GPU activities (kernels, copies, fills) of one call and their summed time in ms."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total_us = sum(float(getattr(e, "device_time", getattr(e, "cuda_time", 0.0))) for e in gpu)
    return len(gpu), total_us / 1000.0


def _compiled(fn: Callable[[], Any], how: str) -> tuple[Callable[[], Any], float]:
    """``fn`` through torch.compile (``how``: default or autotune), compiled by a first call;
    with the seconds that call took."""
    mode = "max-autotune-no-cudagraphs" if how == "autotune" else None
    compiled = torch.compile(fn, dynamic=False, mode=mode)
    t0 = time.perf_counter()
    compiled()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return compiled, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--dtypes", nargs="+", choices=tuple(DTYPES), default=["fp32", "fp16"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--max-faces", type=int, default=4)
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--image", type=Path, default=None, help="face photo (default: astronaut)")
    parser.add_argument("--compile", choices=("none", "default", "autotune"), default="none",
                        help="also time each call through torch.compile (Inductor)")
    parser.add_argument("--only", nargs="+", default=None,
                        help="work items to run (detect-short detect-full mesh short+mesh)")
    parser.add_argument("--json", type=Path, default=Path("out/bench_gpu_models.json"))
    args = parser.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here; use --device cpu")
    torch.set_grad_enabled(False)
    base = {
        "short": load_blazeface("short", models_dir=args.models_dir, max_faces=args.max_faces),
        "full": load_blazeface("full", models_dir=args.models_dir, max_faces=args.max_faces),
        "mesh": load_face_mesh(models_dir=args.models_dir),
    }
    photo = _face_photo_bgr(args.image)
    modes = ["eager", "graph"] if device.type == "cuda" else ["eager"]
    if args.compile != "none":
        modes += ["compiled", "comp+graph"] if device.type == "cuda" else ["compiled"]
    rows: list[dict[str, Any]] = []
    for dtype_name in args.dtypes:
        models = {k: copy.deepcopy(m).to(device, DTYPES[dtype_name]) for k, m in base.items()}
        for batch in args.batches:
            frames = torch.from_numpy(_frames(photo, args.width, args.height, batch)).to(device)
            image_index = torch.arange(batch, device=device)
            found = models["short"](frames)
            fixed_rois = rois_from_detections(found.boxes_xyxy_px[:, 0],
                                              found.keypoints_xy_px[:, 0])
            if not bool(found.valid[:, 0].all()):  # no face found: a centred crop, same work
                side = float(min(args.width, args.height)) * 0.75
                fixed_rois = FaceRois(
                    torch.tensor([[args.width / 2, args.height / 2]] * batch, device=device),
                    torch.full((batch,), side, device=device), torch.zeros(batch, device=device))

            def pipeline(frames: torch.Tensor = frames, models: dict[str, Any] = models,
                         index: torch.Tensor = image_index) -> Any:
                det = models["short"](frames)
                rois = rois_from_detections(det.boxes_xyxy_px[:, 0], det.keypoints_xy_px[:, 0])
                return models["mesh"](frames, index, rois)

            work: dict[str, Callable[[], Any]] = {
                "detect-short": lambda f=frames, m=models: m["short"](f),
                "detect-full": lambda f=frames, m=models: m["full"](f),
                "mesh": lambda f=frames, m=models, i=image_index, r=fixed_rois: m["mesh"](f, i, r),
                "short+mesh": pipeline,
            }
            for name, fn in work.items():
                if args.only and name not in args.only:
                    continue
                compiled, compile_s = None, None
                for mode in modes:
                    if mode in ("compiled", "comp+graph") and compiled is None:
                        compiled, compile_s = _compiled(fn, args.compile)
                    plain = compiled if mode in ("compiled", "comp+graph") else fn
                    assert plain is not None
                    call = _graphed(plain, args.warmup) if mode.endswith("graph") else plain
                    times = np.asarray(_time(call, device, args.warmup, args.iters))
                    p50, p99 = float(np.percentile(times, 50)), float(np.percentile(times, 99))
                    kernels, kernel_ms = _kernels(plain) if device.type == "cuda" \
                        else (None, None)
                    rows.append({"work": name, "batch": batch, "dtype": dtype_name, "mode": mode,
                                 "p50_ms": p50, "p99_ms": p99, "per_frame_ms": p50 / batch,
                                 "frames_per_s": 1000.0 * batch / p50, "kernels": kernels,
                                 "kernel_ms": kernel_ms,
                                 "compile_s": compile_s if plain is compiled else None})
    header = f"{'work':<13}{'batch':>6}{'dtype':>6}{'mode':>11}{'p50 ms':>10}{'p99 ms':>10}" \
             f"{'ms/frame':>10}{'frames/s':>10}{'kernels':>9}{'kernel ms':>11}{'compile s':>11}"
    print(f"device {device}, frames {args.width}x{args.height}, {args.iters} iterations")
    print(header)
    for r in rows:
        kernels = "-" if r["kernels"] is None else str(r["kernels"])
        kernel_ms = "-" if r["kernel_ms"] is None else f"{r['kernel_ms']:.3f}"
        compile_s = "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        print(f"{r['work']:<13}{r['batch']:>6}{r['dtype']:>6}{r['mode']:>11}{r['p50_ms']:>10.3f}"
              f"{r['p99_ms']:>10.3f}{r['per_frame_ms']:>10.3f}{r['frames_per_s']:>10.1f}"
              f"{kernels:>9}{kernel_ms:>11}{compile_s:>11}")
    meta = {"device": str(device), "torch": torch.__version__, "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
            "cpu_threads": torch.get_num_threads(), "frame_wh": [args.width, args.height],
            "iters": args.iters, "max_faces": args.max_faces, "compile": args.compile}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

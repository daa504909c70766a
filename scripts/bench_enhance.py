"""Cost of the face enhancer, pixel boost and hands-in-front, per face and through `livecam run`.

Two sections (both by default), a table each, everything into one JSON file:

- ``cost``: in-process, per face / per frame, median wall ms and process CPU ms: the
  enhancer's own work (align + crop, input, output conversion, paste-back) at 256 and 512 px
  and the stand-in restorer's run (stand-ins: the real restorers are downloads; their network
  cost is not measured here), the neural swap at pixel boost 128/256/512 (``--full`` runs the
  138 M-parameter inswapper-shaped stand-in, else the small one), hands: MediaPipe's hand
  landmarks on a 1080p frame with and without a hand, and the compositing.
- ``run``: ``livecam run --input image:<1080p scene> --output null`` offline (every frame
  processed) for each setting, frames per second from the run's own final line; neural runs
  use stand-in models installed through a manifests dir that accepts them.

On the H200 (``--device cuda``) the ``cost`` section times the GPU twins instead
(``GpuFaceEnhancer``, ``GpuInswapper`` with pixel boost) with the torch engine; mediapipe is not
there, so hands are skipped. Timings on a shared CPU drift by tens of percent with load.

A third section, ``product`` (not in ``all``), is the GPU pipeline's figure: ``livecam run``
built by ``build_streams`` (scripts/bench_gpu_product.py) on bench_gpu.py's one-face 1080p
scene from real photos, null output, offline and live 30 fps, with nothing, each enhancer's
stand-in (the 138 M-parameter generator stand-in), pixel boost 256 and 512, and hands in front
(with no hand in view, and with t1's hand over the chin; hands need the ``mediapipe`` package,
else those rows say why they were skipped). A table and JSON (rewritten after every run).

    python -m scripts.bench_enhance --out bench_enhance.json              # CPU, both sections
    python -m scripts.bench_enhance --device cuda --section cost --full --out $OUT/e.json
    python -m scripts.bench_enhance --section product --photos DIR --models-dir DIR --out F
    python -m scripts.bench_enhance --section product --small --out /tmp/p.json   # CPU check
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ENHANCERS = {"gpen_bfr_256": (256, "arcface_128", False), "gfpgan_1.4": (512, "ffhq_512", False),
             "gpen_bfr_512": (512, "ffhq_512", False), "codeformer": (512, "ffhq_512", True)}


def timed(fn: Callable[[], Any], repeats: int, sync: Callable[[], None] = lambda: None
          ) -> dict[str, float]:
    """Median wall and process-CPU ms of ``fn`` over ``repeats`` runs (one warm-up)."""
    fn()
    sync()
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        sync()
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.process_time() - c0) * 1e3)
    return {"wall_ms": float(np.median(walls)), "cpu_ms": float(np.median(cpus))}


def scene_1080p(with_hand: bool, photos: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """A 1920x1080 frame with the astronaut scaled to its height (face about 200 px wide),
    optionally with t1.jpg's card-holding hand over her lower face (laid in at 512 px, as in
    tests/swap/test_occlusion.py, before scaling); and a source photo (t1's second person).
    ``photos``: (astronaut, t1) BGR where scikit-image and insightface are not installed."""
    import cv2

    from livecam.analysis.photo import analyze_photo

    if photos is None:
        import insightface
        import skimage.data

        photos = (np.ascontiguousarray(skimage.data.astronaut()[..., ::-1]),
                  insightface.data.get_image("t1"))
    astronaut, t1 = photos
    if with_hand:
        astronaut = _with_hand(astronaut, t1)
    frame = np.full((1080, 1920, 3), 120, np.uint8)
    frame[:, 420:1500] = cv2.resize(astronaut, (1080, 1080), interpolation=cv2.INTER_CUBIC)
    faces = analyze_photo(t1)
    x1, y1, x2, y2 = faces.boxes_xyxy[int(np.argsort(faces.boxes_xyxy[:, 0])[1])]
    pad = 0.8 * (x2 - x1)
    source = t1[max(int(y1 - pad), 0):int(y2 + pad), max(int(x1 - pad), 0):int(x2 + pad)]
    return frame, np.ascontiguousarray(source)


def _with_hand(image: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """``image`` with t1's leftmost hand (cut along its landmark region grown by half a
    knuckle spacing), 0.8 of the face's width, over the chin and mouth (the face is still
    found there; a hand over the whole lower face hides it from the face detector)."""
    import cv2

    from livecam.analysis.hands import HandLandmarker, Hands
    from livecam.analysis.photo import analyze_photo
    from livecam.swap.occlusion import hand_alpha, knuckle_spacing_px

    with HandLandmarker(max_hands=4, min_score=0.5, max_side_px=1280) as landmarker:
        hands = landmarker.detect(t1)
    pick = int(np.argmin(hands.landmarks_xy[:, :, 0].mean(axis=1)))
    points = hands.landmarks_xy[pick]
    core = hand_alpha(Hands(points[None], hands.scores[pick:pick + 1]), t1.shape[:2])
    k = 2 * int(0.5 * knuckle_spacing_px(points)) + 1
    cut = cv2.GaussianBlur(cv2.dilate((core > 0.5).astype(np.float32),
                                      np.ones((k, k), np.uint8)), (9, 9), 3)
    ys, xs = np.nonzero(cut > 0.01)
    box = (slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1))
    colour, cut, core = t1[box], cut[box], core[box]
    x1, y1, x2, y2 = analyze_photo(image).boxes_xyxy[0]
    hand_w = np.ptp(np.nonzero((core > 0.5).any(axis=0))[0]) + 1
    scale = 0.8 * (x2 - x1) / hand_w
    colour = cv2.resize(colour, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    cut = cv2.resize(cut, (colour.shape[1], colour.shape[0]))[..., None]
    h, w = colour.shape[:2]
    top, left = int(y1 + 0.8 * (y2 - y1) - h / 2), int(x1 - 0.2 * w)
    out = image.copy()
    region = out[top:top + h, left:left + w].astype(np.float32)
    out[top:top + h, left:left + w] = np.round(cut * colour + (1 - cut) * region)
    return out


def cost_cpu(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.swap.enhance import (
        FaceEnhancer,
        crops_to_input,
        output_to_bgr,
        paste_restored,
    )
    from livecam.swap.inswapper import InswapperModel
    from tests.helpers.standins import build_enhancer, build_inswapper

    frame, _ = scene_1080p(with_hand=False)
    kps = five_point(analyze_photo(frame).landmarks_xy)[:1]
    rows: list[dict[str, Any]] = []
    for name, (size, template, weighted) in ENHANCERS.items():
        path = build_enhancer(work / f"{name}.onnx", size_px=size, weight_input=weighted)
        enh = FaceEnhancer(OnnxRuntimeEngine(path, device="cpu"), size_px=size,
                           template=template, blend=0.8)
        enh.open()
        crops, matrices = enh.align(frame, kps)
        blob = crops_to_input(crops)
        restored = enh.restore(crops)
        feeds: dict[str, np.ndarray] = {"input": blob}
        if weighted:
            feeds["weight"] = np.array([0.5])
        pred = enh.engine.run(feeds)["output"]
        parts = {
            "align_crop": timed(lambda: enh.align(frame, kps), args.repeats),  # noqa: B023
            "input": timed(lambda: crops_to_input(crops), args.repeats),  # noqa: B023
            "network (stand-in)": timed(lambda: enh.engine.run(feeds), args.repeats),  # noqa: B023
            "output": timed(lambda: output_to_bgr(pred), args.repeats),  # noqa: B023
            "paste": timed(lambda: paste_restored(frame, restored[0], matrices[0],  # noqa: B023
                                                  blend=0.8), args.repeats),
        }
        for part, t in parts.items():
            rows.append({"what": f"enhancer {name} ({size} px)", "part": part, **t})
        own = {k: sum(t[k] for p, t in parts.items() if "network" not in p)
               for k in ("wall_ms", "cpu_ms")}
        rows.append({"what": f"enhancer {name} ({size} px)", "part": "ours, all but the network",
                     **own})
    size = "full" if args.full else "small"
    swapper = build_inswapper(work / f"inswapper_{size}.onnx", size=size)
    latent = np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32)
    for boost in (128, 256, 512):
        model = InswapperModel(OnnxRuntimeEngine(swapper, device="cpu"), swapper,
                               pixel_boost_px=boost)
        model.open()
        lat = model.latents(latent)
        t = timed(lambda: model.swap(frame, kps, lat), 1 if args.full else args.repeats)  # noqa: B023
        rows.append({"what": f"neural swap, pixel boost {boost} ({size} stand-in)",
                     "part": f"{(boost // 128) ** 2} generator runs + paste", **t})
    from livecam.analysis.hands import HandLandmarker
    from livecam.swap.occlusion import keep_in_front

    for with_hand in (False, True):
        scene, _ = scene_1080p(with_hand)
        with HandLandmarker() as landmarker:
            hands = landmarker.detect(scene)
            t = timed(lambda: landmarker.detect(scene), args.repeats)  # noqa: B023
        rows.append({"what": f"hands, 1080p {'with' if with_hand else 'without'} a hand",
                     "part": f"MediaPipe hands (found {len(hands)})", **t})
        if len(hands):
            swapped = scene.copy()
            rows.append({"what": "hands, 1080p with a hand", "part": "keep in front",
                         **timed(lambda: keep_in_front(swapped, scene, hands), args.repeats)})  # noqa: B023
    return rows


def cost_cuda(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The GPU twins on the H200 (no mediapipe there: five points from the CPU are not
    available either, so a fixed frontal face layout on a synthetic 1080p frame is used)."""
    import torch

    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.swap.enhance import GpuFaceEnhancer
    from livecam.gpupipe.swap.neural import GpuInswapper
    from tests.helpers.standins import build_enhancer, build_inswapper

    on_cuda = args.device == "cuda"
    device = torch.device("cuda" if on_cuda else "cpu")  # torch-cpu: checks the script here

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize()

    frames = torch.randint(0, 255, (1, 1080, 1920, 3), dtype=torch.uint8, device=device)
    # a 300 px wide frontal face at the frame's centre, ArcFace point order
    five = torch.tensor([[[885.0, 470.0], [1035.0, 470.0], [960.0, 555.0], [895.0, 640.0],
                          [1025.0, 640.0]]], device=device)
    precision = args.precision if on_cuda else "fp32"
    rows: list[dict[str, Any]] = []
    for faces in (1, 4):
        index = torch.zeros(faces, dtype=torch.long, device=device)
        kps = five.repeat(faces, 1, 1)
        valid = torch.ones(faces, dtype=torch.bool, device=device)
        for name, (size, template, weighted) in ENHANCERS.items():
            path = build_enhancer(work / f"{name}.onnx", size_px=size, weight_input=weighted)
            engine = TorchEngine(path, device=device.type, precision=precision,
                                 cuda_graphs=False)
            engine.open()
            enh = GpuFaceEnhancer(engine, size_px=size, template=template, window_px=768)
            enh.open(device)
            with torch.inference_mode():
                t = timed(lambda: enh.enhance_(frames, index, kps, valid), args.repeats, sync)  # noqa: B023
            rows.append({"what": f"GPU enhancer {name} ({size} px, stand-in network)",
                         "part": f"{faces} face(s), per face", "wall_ms": t["wall_ms"] / faces,
                         "cpu_ms": t["cpu_ms"] / faces})
        size = "full" if args.full else "small"
        swapper = build_inswapper(work / f"inswapper_{size}_dyn.onnx", size=size, batch="N")
        engine = TorchEngine(swapper, device=device.type, precision=precision,
                             cuda_graphs=False)
        engine.open()
        latents = torch.nn.functional.normalize(torch.randn(faces, 512, device=device), dim=1)
        for boost in (128, 256, 512):
            sw = GpuInswapper(engine, window_px=640, pixel_boost_px=boost)
            sw.open(device)
            with torch.inference_mode():
                t = timed(lambda: sw.swap_(frames, index, kps, latents, valid), args.repeats,  # noqa: B023
                          sync)
            rows.append({"what": f"GPU swap, pixel boost {boost} ({size} stand-in, "
                                 f"{precision}, eager)",
                         "part": f"{faces} face(s), per face", "wall_ms": t["wall_ms"] / faces,
                         "cpu_ms": t["cpu_ms"] / faces})
    return rows


def install_models(root: Path) -> tuple[Path, Path]:
    """Stand-in swapper, recognizer and enhancers with manifests that accept them."""
    from tests.helpers.standins import install_standin_models

    return install_standin_models(root, enhancers=tuple(ENHANCERS))


SETTINGS = {
    "classic": ["swap.mode=classic"],
    "classic + hands": ["swap.mode=classic", "swap.hands_in_front=true"],
    "neural": ["swap.mode=neural"],
    "neural + hands": ["swap.mode=neural", "swap.hands_in_front=true"],
    "neural, pixel boost 256": ["swap.mode=neural", "advanced.swap.pixel_boost=256"],
    "neural, pixel boost 512": ["swap.mode=neural", "advanced.swap.pixel_boost=512"],
    "neural + gpen_bfr_256": ["swap.mode=neural", "swap.enhancer=gpen_bfr_256"],
    "neural + gfpgan_1.4": ["swap.mode=neural", "swap.enhancer=gfpgan_1.4"],
    "neural + codeformer": ["swap.mode=neural", "swap.enhancer=codeformer"],
}
_LINE = re.compile(r"whole run ([\d.]+) s: sent (\d+) frames \(([\d.]+) fps; ([\d.]+) fps new")


def run_section(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    import cv2

    models, manifests = install_models(work / "standins")
    rows = []
    for with_hand in (False, True):
        scene, source = scene_1080p(with_hand)
        scene_path = work / f"scene_{with_hand}.png"
        source_path = work / "source.png"
        cv2.imwrite(str(scene_path), scene)
        cv2.imwrite(str(source_path), source)
        for label, sets in SETTINGS.items():
            if (with_hand and "hands" not in label) or args.only not in label:
                continue
            cmd = [sys.executable, "-c", "import sys; from livecam.cli import main; "
                   "sys.exit(main())", "run", "--input", f"image:{scene_path}",
                   "--output", "null", "--source", str(source_path), "--frames",
                   str(args.frames), "--set", "advanced.pipeline.realtime=false",
                   "--set", "advanced.gpu.pipeline=never", "--set", f"advanced.models.dir={models}",
                   "--set", f"advanced.models.manifests_dir={manifests}",
                   "--set", "control.api=false",
                   "--set", "control.hotkeys=false", "--log-level", "INFO"]
            for s in sets:
                cmd += ["--set", s]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1800)
            match = _LINE.search(done.stdout + done.stderr)
            row: dict[str, Any] = {"setting": label, "hand in scene": with_hand,
                                   "rc": done.returncode}
            if match:
                row.update(wall_s=float(match[1]), sent=int(match[2]), fps=float(match[4]))
                status = [ln for ln in (done.stdout + done.stderr).splitlines()
                          if "fps in" in ln]
                if status:  # the stages' own timings, from the last status line
                    row["stage_ms"] = {k: float(v) for k, v in
                                       re.findall(r"(\w+)=([\d.]+)ms", status[-1])}
            else:
                row["error"] = (done.stderr or done.stdout)[-400:]
            rows.append(row)
            print(f"  {label:30s} hand={with_hand!s:5s} "
                  f"{row.get('fps', float('nan')):6.2f} fps  {row.get('stage_ms', '')}  "
                  f"rc={done.returncode}", flush=True)
    return rows


def product_section(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``livecam run`` fps and latency with each option on (bench_gpu_product.quality_runs), on
    bench_gpu.py's one-face 1080p scene from real photos (``--small``: 640x360 and the small
    generator, to check the script on a CPU), rewriting ``--out`` after every run."""
    from scripts.bench_gpu_product import (
        QUALITY_ENHANCERS,
        print_quality_table,
        quality_runs,
        why_no_hands,
    )
    from scripts.gpu_harness import prepare

    report: dict[str, Any] = {"errors": {}, "sections": {}}
    t_start = time.perf_counter()

    def save() -> None:
        Path(args.out).write_text(json.dumps(report, indent=2, default=float))

    def section(name: str, fn: Callable[[], Any] | None, skipped: str = "") -> None:
        if fn is None or time.perf_counter() - t_start > args.budget_s:
            report["sections"][name] = {"skipped": skipped or f"over the {args.budget_s} s"}
        else:
            try:
                report["sections"][name] = fn()
            except Exception as exc:  # keep what was measured; say what broke
                report["errors"][name] = f"{type(exc).__name__}: {exc}"[:600]
        print(f"  {name}: {time.perf_counter() - t_start:.0f} s", flush=True)
        save()

    setup = prepare(args, work, report, enhancers=QUALITY_ENHANCERS)
    hand_scene = None
    if not why_no_hands() and not args.small:
        import cv2

        from scripts.bench_gpu_scenes import load_photos

        photos = load_photos(args.photos)  # astronaut.png, t1.png (export_bench_assets.py)
        astronaut = next(p for p in photos if p.shape[:2] == (512, 512))
        t1 = next(p for p in photos if p.shape[:2] == (886, 1280))
        hand_scene = work / "scene_hand.png"
        cv2.imwrite(str(hand_scene), scene_1080p(True, (astronaut, t1))[0])
    quality_runs(setup, section, warm_s=args.warm_s, window_s=args.window_s,
                 hand_scene=hand_scene, only=args.only)
    report["wall_s"] = time.perf_counter() - t_start
    save()
    print_quality_table(report)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--section", choices=("cost", "run", "all", "product"), default="all",
                        help="product: livecam run with the GPU pipeline and each option "
                             "(the H200 run; see the module docstring)")
    parser.add_argument("--device", choices=("cpu", "cuda", "torch-cpu"), default="cpu",
                        help="cpu: the CPU path; cuda: the GPU twins (H200); torch-cpu: the "
                             "GPU twins on the CPU (to check the script)")
    parser.add_argument("--precision", choices=("fp16", "fp32"), default="fp16")
    parser.add_argument("--full", action="store_true",
                        help="time pixel boost with the 138 M-parameter generator stand-in")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--out", default="bench_enhance.json")
    parser.add_argument("--work-dir", default="")
    parser.add_argument("--only", default="",
                        help="run only settings whose label contains this text (product: "
                             "one of these comma-separated texts)")
    parser.add_argument("--photos", type=Path, default=None,
                        help="product: a folder of face photos (default: installed packages)")
    parser.add_argument("--models-dir", default=None,
                        help="product: copy of mediapipe/modules (export_bench_assets.py)")
    parser.add_argument("--small", action="store_true",
                        help="product: 640x360 and the small generator (a CPU check)")
    parser.add_argument("--warm-s", type=float, default=2.0)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--budget-s", type=float, default=540.0,
                        help="product: skip the remaining runs after this many seconds")
    args = parser.parse_args()
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_enhance_"))
    work.mkdir(parents=True, exist_ok=True)
    if args.section == "product":
        if args.models_dir:
            os.environ["LIVECAM_MEDIAPIPE_MODULES"] = str(Path(args.models_dir).resolve())
        product_section(args, work)
        print(f"wrote {args.out}")
        return 0
    result: dict[str, Any] = {"device": args.device, "load_avg": os.getloadavg(),
                              "cpu_count": os.cpu_count(), "full_generator": args.full}
    if args.section in ("cost", "all"):
        rows = (cost_cpu if args.device == "cpu" else cost_cuda)(args, work)
        result["cost"] = rows
        print(f"{'what':58s} {'part':34s} {'wall ms':>9s} {'CPU ms':>9s}")
        for r in rows:
            print(f"{r['what']:58s} {r['part']:34s} {r['wall_ms']:9.2f} {r['cpu_ms']:9.2f}")
        Path(args.out).write_text(json.dumps(result, indent=2))
    if args.section in ("run", "all") and args.device == "cpu":
        print("livecam run, 1080p, offline (every frame), CPU:")
        result["run"] = run_section(args, work)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The harness that ``bench_gpu.py``, ``bench_streams.py`` and ``bench_enhance.py`` share: their
common options, the report written after every section, the scenes, stand-in models, identity
and config of a run (:func:`prepare`), and ``livecam engines build`` as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts.bench_gpu_product import make_identity
from scripts.bench_gpu_scenes import (
    BACKGROUNDS,
    build_scene,
    find_faces,
    load_photos,
    write_clip,
)

#: A stream is held when every stream's capture->sink p99 is within one 30 fps frame interval
#: + 5 ms (goal 1's bound: capture->sink includes up to one interval of waiting for the
#: output's next tick, so a paced output sits near 33 ms however fast the swap is) and no
#: frame was late.
STREAM_P99_MS = 1000 / 30 + 5


def add_options(parser: argparse.ArgumentParser, *, streams: str, budget_s: float,
                out: str) -> None:
    """The options of a run through ``livecam run`` (defaults: ``streams``, ``budget_s``,
    ``out``)."""
    parser.add_argument("--small", action="store_true",
                        help="small stand-in, 640x360, short windows (a CPU check)")
    parser.add_argument("--photos", type=Path, default=None)
    parser.add_argument("--models-dir", default=None,
                        help="copy of mediapipe/modules (default: the installed mediapipe)")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--streams", default=streams, help="stream counts, comma-separated")
    parser.add_argument("--input", choices=("clip", "image"), default="clip",
                        help="what livecam run reads: the scene swaying in a raw video (a new "
                             "frame each time, as a camera gives) or the still scene as an "
                             "image: input (the same array each time)")
    parser.add_argument("--background", choices=BACKGROUNDS, default="blobs",
                        help="the scene's background (scripts/bench_gpu_scenes.py; blobs of "
                             "strong colour, the figures' scene before wall, give stray edge "
                             "covers)")
    parser.add_argument("--window-s", type=float, default=6.0)
    parser.add_argument("--warm-s", type=float, default=2.0)
    parser.add_argument("--engines-build", action="store_true",
                        help="first run `livecam engines build inswapper_128 --size WxH` with "
                        "the benchmark's config, as a user prepares a machine: the runs after "
                        "it start from what it compiled")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                        help="a config override for every run, as `livecam run --set`")
    parser.add_argument("--budget-s", type=float, default=budget_s,
                        help="skip the remaining runs after this many seconds")
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING"), default="WARNING",
                        help="livecam's own log lines (INFO: each network's compile or load "
                             "and each stream's start, part by part)")


def start(args: argparse.Namespace, *, results: str
          ) -> tuple[Path, dict[str, Any], Callable[[], None]]:
    """Logging, the mediapipe models folder and the work folder set up from ``args``; the
    report (``host``, ``errors`` and an empty ``results`` section) and its ``save()``, which
    rewrites ``args.out`` (call it after every section: a time-out keeps what was measured)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("livecam").setLevel(args.log_level)
    if args.models_dir:
        os.environ["LIVECAM_MEDIAPIPE_MODULES"] = str(Path(args.models_dir).resolve())
    work = (args.work_dir or Path(tempfile.mkdtemp(prefix="livecam_bench_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"host": {"python": platform.python_version()}, "errors": {},
                              results: {}}

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=2, default=float))

    return work, report, save


def prepare(args: Any, work: Path, report: dict[str, Any],
            enhancers: tuple[str, ...] = ()) -> dict[str, Any]:
    """Scenes (PNG), the stand-in models installed (``enhancers``: enhancer stand-ins too,
    see ``install_standin_models``), the identity, the config maker."""
    import cv2
    import torch

    from livecam.config import load_config
    from livecam.gpupipe.networks.models import load_blazeface
    from livecam.identity.model import IdentityCollection
    from tests.helpers.standins import count_parameters

    height, width = (360, 640) if args.small else (1080, 1920)
    photos = load_photos(args.photos)
    faces = find_faces(load_blazeface("full", models_dir=args.models_dir), photos,
                       torch.device("cpu"))
    scenes, frames = {}, {}
    for n in (1, 4):
        scene = build_scene(faces, n, height, width,
                            background=getattr(args, "background", "blobs"))
        scenes[n] = work / f"scene_{n}.png"
        frames[n] = scene.frame_bgr
        cv2.imwrite(str(scenes[n]), scene.frame_bgr)
    if getattr(args, "input", "clip") == "clip":
        inputs = {n: f"file:{write_clip(frames[n], work / f'scene_{n}.nut')}" for n in frames}
    else:
        inputs = {n: f"image:{scenes[n]}" for n in scenes}
    size = "small" if args.small else "full"
    onnx = work / f"models_{size}" / "build" / "inswapper_128.onnx"
    astronaut = next((p for p in photos if p.shape[:2] == (512, 512)), photos[0])
    identities = IdentityCollection({"astro": make_identity(astronaut, args.models_dir)})
    base = [*neural_settings(work, size, enhancers), "control.api=false",
            "control.hotkeys=false", "advanced.pipeline.status_interval_s=0",
            f"identity.library_dir={work / 'lib'}", "capture.fps=30",
            *getattr(args, "sets", [])]

    def config(*overrides: str) -> Any:
        return load_config(None, [*base, *overrides])

    report.update({
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__, "frame": f"{width}x{height}",
        "model": {"parameters": count_parameters(onnx), "size": size},
        "config": base, "faces_in_photos": len(faces)})
    report["input"] = inputs[1].split(":")[0]
    report["background"] = getattr(args, "background", "blobs")
    return {"scenes": scenes, "inputs": inputs, "frames": frames, "identities": identities,
            "config": config, "onnx": onnx, "base": base}


def neural_settings(work: Path, size: str = "full", enhancers: tuple[str, ...] = ()
                    ) -> list[str]:
    """The neural swap on the GPU pipeline with the stand-in models (``size`` as
    ``install_standin_models``; installed under ``work`` once) and an engine cache under
    ``work``, as ``--set`` overrides; on a machine without CUDA, on torch's CPU device."""
    import torch

    from tests.helpers.standins import install_standin_models

    marker = work / f"models_{size}" / f"done{'_'.join(('', *enhancers))}"
    if not marker.exists():
        install_standin_models(work / f"models_{size}", size=size, enhancers=enhancers)
        marker.write_text("ok")
    sets = ["swap.mode=neural", "advanced.gpu.pipeline=always",
            f"advanced.models.dir={work / f'models_{size}' / 'models'}",
            f"advanced.models.manifests_dir={work / f'models_{size}' / 'manifests'}",
            f"advanced.engine.cache_dir={work / 'cache' / 'engines'}"]
    if not torch.cuda.is_available():
        sets.append("advanced.engine.device=cpu")
    return sets


def engines_build(sets: list[str], *args: str) -> dict[str, Any]:
    """``livecam engines build inswapper_128 ARGS`` with the config ``sets``, as a
    subprocess, as a user runs it: its time and the end of what it printed. Its progress
    lines (stderr: one per compiled shape) go to this script's stderr as they come, so a
    build cut short by a time limit still shows how far it got."""
    # config options go before the verb, as `livecam engines --help` says
    cmd = [sys.executable, "-m", "livecam.cli", "engines",
           *[a for s in sets for a in ("--set", s)], "build", "inswapper_128", *args]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.PIPE, text=True, bufsize=1) as child:
        assert child.stderr is not None
        tail: list[str] = []
        for line in child.stderr:
            sys.stderr.write(f"  [engines build] {line}")
            sys.stderr.flush()
            tail = [*tail[-20:], line]
        code = child.wait(timeout=900)
        out.seek(0)
        stdout = out.read()
    if code != 0:
        raise RuntimeError(f"engines build failed: {''.join(tail)[-500:]}")
    return {"build_s": time.perf_counter() - t0, "stdout": stdout[-600:],
            "progress": [line.rstrip() for line in tail if line.startswith("compiling ")
                         or "planned shapes" in line]}

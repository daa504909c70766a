"""``livecam doctor``: what this machine has for livecam, and what to do about what is missing.

Ends with one verdict line for the default live job (camera -> virtual camera) and exits with a
status scripts can use: 0 ready for camera -> virtual camera, 1 file only (no camera or no virtual
camera), 2 nothing works (the face models are missing). Optional parts (GPU, neural models,
engines, TensorRT) are listed apart and never change the status.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from livecam.subcommands.common import command_parser, config_from_args

if TYPE_CHECKING:
    from livecam.config import Config


@dataclass(frozen=True)
class Check:
    """One line of the report: ``ok`` true/false/None (None = informational)."""

    topic: str
    ok: bool | None
    detail: str
    fix: str = ""


def add_parser(sub: argparse._SubParsersAction) -> None:
    command_parser(sub, run, "doctor", help="check cameras, virtual cameras, GPU and engines",
                   description="Report the cameras, virtual-camera backends, GPU, CUDA, "
                   "TensorRT and onnxruntime found on this machine, each with what to do "
                   "when it is missing. Optional parts (GPU, neural models, TensorRT) are "
                   "listed apart and never change the verdict. Exit status: 0 ready for "
                   "camera -> virtual camera; 1 file only (no camera or no virtual camera); "
                   "2 nothing works (face models missing).")


def _v4l2_devices() -> list[tuple[str, str, bool]]:
    """(path, name, is_loopback) for each /dev/video* on Linux."""
    out = []
    for path in sorted(glob.glob("/dev/video*")):
        node = Path("/sys/class/video4linux") / Path(path).name
        name = (node / "name").read_text().strip() if (node / "name").exists() else "?"
        # v4l2loopback devices are virtual: their sysfs device has no parent bus
        real = (node / "device").exists()
        out.append((path, name, not real))
    return out


def check_cameras() -> list[Check]:
    if sys.platform.startswith("linux"):
        devices = [d for d in _v4l2_devices() if not d[2]]
        if not devices:
            return [Check("cameras", False, "no /dev/video* camera found",
                          "plug in a webcam; use --input file:PATH or --input synthetic to try "
                          "livecam without one")]
        return [Check("cameras", True, ", ".join(f"{p} ({n})" for p, n, _ in devices),
                      "use --input camera:/dev/videoN")]
    return [Check("cameras", None, "not listed on this platform",
                  "try --input camera:0, camera:1, ...")]


def check_virtualcam() -> list[Check]:
    import pyvirtualcam

    backends = ", ".join(pyvirtualcam.camera.BACKENDS) or "none"
    checks = [Check("virtual camera backends", bool(pyvirtualcam.camera.BACKENDS), backends)]
    if sys.platform.startswith("linux"):
        from livecam.output.sinks import virtualcam_help

        loop = [d for d in _v4l2_devices() if d[2]]
        if loop:
            checks.append(Check("v4l2loopback devices", True,
                                ", ".join(f"{p} ({n})" for p, n, _ in loop),
                                "use --set output.device=/dev/videoN to pick one"))
        else:
            checks.append(Check("v4l2loopback devices", False, "none", virtualcam_help()))
    return checks


def _module_version(name: str) -> str | None:
    if importlib.util.find_spec(name) is None:
        return None
    module = __import__(name)
    return str(getattr(module, "__version__", "installed"))


def check_gpu() -> list[Check]:
    checks = []
    smi = shutil.which("nvidia-smi")
    checks.append(Check("NVIDIA driver", smi is not None, smi or "nvidia-smi not found",
                        "" if smi else "no NVIDIA GPU driver: livecam runs on the CPU (classic "
                        "swap); for the GPU pipeline install the NVIDIA driver"))
    torch_version = _module_version("torch")
    if torch_version is None:
        checks.append(Check("torch", False, "not installed",
                            "pip install 'livecam[torch]' (with a CUDA build) for the torch "
                            "engine backend"))
    else:
        import torch

        cuda = torch.cuda.is_available()
        name = torch.cuda.get_device_name(0) if cuda else "no CUDA device"
        checks.append(Check("torch CUDA", cuda, f"torch {torch_version}: {name}",
                            "" if cuda else "install a CUDA build of torch to use the GPU"))
        checks.append(check_gpu_compiler(cuda))
    trt = _module_version("tensorrt")
    checks.append(Check("TensorRT", trt is not None, trt or "not installed",
                        "" if trt else "pip install tensorrt (NVIDIA GPUs) for the fastest "
                        "engine backend; livecam falls back to torch or onnxruntime only when "
                        "engine.backend is auto"))
    ort = _module_version("onnxruntime")
    if ort is None:
        checks.append(Check("onnxruntime", False, "not installed", "pip install onnxruntime"))
    else:
        import onnxruntime

        providers = ", ".join(onnxruntime.get_available_providers())
        checks.append(Check("onnxruntime", True, f"{ort}: {providers}"))
    return checks


def check_gpu_compiler(cuda: bool) -> Check:
    """Triton, which torch.compile needs to compile the face networks on a GPU
    (``advanced.gpu.compile_networks``): Linux wheels of torch bring it, Windows ones do not."""
    from livecam.gpupipe.networks.compiled import triton_install_hint

    triton = _module_version("triton")
    if triton is not None:
        return Check("torch.compile on the GPU (Triton)", True if cuda else None,
                     f"triton {triton}: the face networks compile on the GPU (the first start "
                     "compiles for minutes, later starts load it)")
    return Check("torch.compile on the GPU (Triton)", False if cuda else None,
                 "triton is not installed: on a GPU the face networks run uncompiled "
                 "(slower)", triton_install_hint() if cuda else "")


def check_engine() -> list[Check]:
    """The engine backend ``engine.backend: auto`` picks for neural swaps, and why."""
    from livecam.config.engine import EngineConfig
    from livecam.core.errors import DependencyError
    from livecam.engines.registry import choose_backend, probe_backends

    config = EngineConfig()
    checks = [Check(f"engine backend {name}", ok, why)
              for name, (ok, why) in probe_backends(config.device).items()]
    try:
        choice = choose_backend("auto", config.device)
    except DependencyError as exc:
        return [*checks, Check("engine backend (auto)", False, str(exc))]
    return [*checks, Check("engine backend (auto)", True, f"{choice.name}: {choice.reason}",
                           "set engine.backend to name one; a named backend that is missing "
                           "is an error, never a silent fallback")]


def check_triton(config: Config) -> list[Check]:
    """With ``engine.backend: triton``: is each server in ``advanced.engine.triton_urls`` ready, and
    does it serve the swap model and its recognizer?"""
    if config.engine.backend != "triton":
        return []
    from livecam.engines.registry import model_store
    from livecam.engines.triton_client import probe_server

    swapper = model_store(config.models).manifest(config.swap.model)
    models = [swapper.name, swapper.recognizer or "w600k_r50"]
    fix = ("start one with `livecam engines serve` where the GPU is, or fix "
           "advanced.engine.triton_urls (docs/triton.md)")
    checks = []
    for url in config.engine.triton_urls:
        ok, detail = probe_server(url, models)
        checks.append(Check("triton server", ok, detail, "" if ok else fix))
    return checks


def check_neural_models() -> list[Check]:
    """Whether the models ``swap.mode: neural`` needs are installed (not re-hashed here)."""
    from livecam.config.engine import ModelsConfig
    from livecam.engines.registry import model_store

    store = model_store(ModelsConfig())
    checks = []
    for name in ("inswapper_128", "w600k_r50"):
        status = store.status(name)
        checks.append(Check(f"neural model {name}", status.present,
                            str(status.path) if status.present else "not installed",
                            "" if status.present else f"for swap.mode: neural run `livecam models "
                            f"fetch {name}` (or `livecam models import {name} FILE`); the "
                            "default classic swap needs no download"))
    return checks


def check_models() -> list[Check]:
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or spec.origin is None:
        return [Check("mediapipe face models", False, "mediapipe not installed",
                      "pip install mediapipe==0.10.21")]
    root = Path(spec.origin).parent / "modules"
    found = sorted(p.name for p in root.glob("face_*/*.tflite"))
    from livecam.analysis.litert import litert_interpreter

    fast = litert_interpreter() is not None
    return [Check("mediapipe face models", bool(found), ", ".join(found) or "none found",
                  "" if found else "reinstall mediapipe==0.10.21 (later releases ship no "
                  "models)"),
            Check("face model runtime", fast,
                  "LiteRT (ai-edge-litert): detector and 468-point mesh run directly" if fast
                  else "MediaPipe's graphs (slower: about 2 ms more per face and detection)",
                  "" if fast else "pip install ai-edge-litert")]


def check_display() -> list[Check]:
    if sys.platform.startswith("linux"):
        display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        return [Check("display (hotkeys, preview)", bool(display), display or "none",
                      "" if display else "headless: hotkeys and --output window are off; use "
                      "`livecam daemon` and `livecam ctl`")]
    return [Check("display (hotkeys, preview)", True, "desktop session assumed")]


CHECKS: tuple[Callable[[], list[Check]], ...] = (
    check_cameras, check_virtualcam, check_models, check_display,
)
"""What the default path (classic swap, camera -> virtual camera) needs."""

OPTIONAL_CHECKS: tuple[Callable[[], list[Check]], ...] = (
    check_gpu, check_engine, check_neural_models,
)
"""Parts only the GPU pipeline or neural swaps need: a miss here is not a failure."""

READY, FILE_ONLY, NOTHING = 0, 1, 2


def verdict(checks: list[Check]) -> tuple[int, str]:
    """(exit status, one line) from the default path's checks."""
    def ok(prefix: str) -> bool:
        found = [c for c in checks if c.topic.startswith(prefix)]
        return bool(found) and all(c.ok is not False for c in found)

    if not ok("mediapipe face models"):
        return NOTHING, "nothing works: the face models are missing (see above)"
    camera, virtual = ok("cameras"), ok("v4l2loopback") and ok("virtual camera backends")
    if camera and virtual:
        return READY, "ready for: camera -> virtual camera (and files)"
    missing = " and ".join(n for n, have in (("no camera", camera),
                                              ("no virtual camera", virtual)) if not have)
    return FILE_ONLY, f"file only ({missing}): livecam run --input file:IN --output file:OUT"


def _report(name: str, check_fn: Callable[[], list[Check]]) -> list[Check]:
    mark = {True: "ok  ", False: "MISS", None: "info"}
    try:
        checks = check_fn()
    except Exception as exc:  # doctor reports; it must not crash on a broken package
        checks = [Check(name.removeprefix("check_"), False,
                        f"check failed: {type(exc).__name__}: {exc}")]
    for c in checks:
        print(f"[{mark[c.ok]}] {c.topic}: {c.detail}")
        if c.fix and c.ok is not True:
            print(f"       -> {c.fix}")
        elif c.fix and c.ok:
            print(f"       ({c.fix})")
    return checks


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    print("Default path (classic swap, camera -> virtual camera):")
    essential = [c for f in CHECKS for c in _report(f.__name__, f)]
    print()
    print("Optional (GPU pipeline, neural swap; a miss here is not a failure):")
    optional: list[tuple[str, Callable[[], list[Check]]]] = [
        (f.__name__, f) for f in OPTIONAL_CHECKS]
    optional.append(("check_triton", partial(check_triton, config)))
    for name, check_fn in optional:
        _report(name, check_fn)
    status, line = verdict(essential)
    print()
    print(f"verdict: {line}")
    return status

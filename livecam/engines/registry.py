"""Choose an engine backend by name and build engines; the only place backends are imported.

``auto`` picks tensorrt (importable, CUDA GPU), then torch on a CUDA GPU, then onnxruntime, and
says why. ``triton`` (the models run on a Triton Inference Server) is only ever named, never
picked by ``auto``: a remote server is a deployment decision. Naming a backend that is not
available is a :class:`DependencyError` that names what to install; it never falls back
silently.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from livecam.config.engine import EngineConfig, ModelsConfig
from livecam.core.errors import DependencyError
from livecam.engines.manifest import ModelManifest, load_manifests
from livecam.engines.protocol import Engine
from livecam.engines.store import ModelStore, default_models_dir

if TYPE_CHECKING:
    from livecam.engines.torch_engine import TorchEngine

log = logging.getLogger(__name__)

INSTALL_HINTS = {
    "tensorrt": "pip install tensorrt (needs an NVIDIA GPU and driver) and a CUDA build of torch",
    "torch": "pip install 'livecam[torch]' (a CUDA build of torch for GPUs)",
    "onnxruntime": "pip install onnxruntime (or onnxruntime-gpu)",
    "triton": "pip install 'livecam[triton]' (the Triton client; see docs/triton.md)",
}


@dataclass(frozen=True)
class BackendChoice:
    name: str
    reason: str


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def probe_backends(device: str = "auto") -> dict[str, tuple[bool, str]]:
    """name -> (usable here, why or why not). Imports torch to look for CUDA; nothing heavier."""
    cuda = device != "cpu" and _cuda_available()
    out: dict[str, tuple[bool, str]] = {}
    if importlib.util.find_spec("tensorrt") is None:
        out["tensorrt"] = (False, "tensorrt is not installed")
    elif not cuda:
        out["tensorrt"] = (False, "no CUDA GPU visible to torch")
    else:
        out["tensorrt"] = (True, "tensorrt is installed and a CUDA GPU is present")
    if importlib.util.find_spec("torch") is None:
        out["torch"] = (False, "torch is not installed")
    elif device == "cuda" and not cuda:
        out["torch"] = (False, "torch sees no CUDA GPU")
    else:
        out["torch"] = (True, "on a CUDA GPU" if cuda else "on the CPU (slow: tests only)")
    if importlib.util.find_spec("onnxruntime") is None:
        out["onnxruntime"] = (False, "onnxruntime is not installed")
    else:
        out["onnxruntime"] = (True, "installed")
    if importlib.util.find_spec("tritonclient") is None:
        out["triton"] = (False, "the Triton client (tritonclient) is not installed")
    else:
        out["triton"] = (True, "client installed; the models run on advanced.engine.triton_urls")
    return out


def choose_backend(requested: str, device: str = "auto") -> BackendChoice:
    """Resolve ``engine.backend`` (auto or a name) to a usable backend, with the reason."""
    status = probe_backends(device)
    if requested != "auto":
        if requested not in status:
            raise DependencyError(f"unknown engine backend {requested!r} "
                                  f"(choose auto, {', '.join(status)})")
        ok, why = status[requested]
        if not ok:
            raise DependencyError(f"engine.backend is {requested} but {why}: "
                                  f"{INSTALL_HINTS[requested]}")
        return BackendChoice(requested, f"asked for in the config ({why})")
    if status["tensorrt"][0]:
        return BackendChoice("tensorrt", "auto: " + status["tensorrt"][1])
    torch_ok, torch_why = status["torch"]
    if torch_ok and torch_why == "on a CUDA GPU":
        return BackendChoice("torch", f"auto: {status['tensorrt'][1]}; torch runs on a CUDA GPU")
    if status["onnxruntime"][0]:
        return BackendChoice("onnxruntime", f"auto: {status['tensorrt'][1]} and no CUDA torch; "
                             "onnxruntime on the CPU")
    raise DependencyError("no engine backend is installed: " + INSTALL_HINTS["onnxruntime"])


def model_store(models: ModelsConfig) -> ModelStore:
    """The store for the configured models dir and manifests."""
    models_dir = Path(models.dir).expanduser() if models.dir else default_models_dir()
    return ModelStore(models_dir, load_manifests(models.manifests_dir or None),
                      lock_wait_s=models.lock_wait_s)


def engine_cache_dir(engine: EngineConfig) -> Path:
    if engine.cache_dir:
        return Path(engine.cache_dir).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("livecam", appauthor=False)) / "engines"


def create_torch_engine(manifest: ModelManifest, model_path: Path, model_sha256: str,
                        config: EngineConfig, *, device: str, precision: str,
                        cuda_graphs: bool = True,
                        batch_sizes: tuple[int, ...] = ()) -> TorchEngine:
    """An unopened torch engine run as ``advanced.engine.torch_mode`` says (the one place that reads
    it): ``compiled``/``auto`` look for the packages ``livecam engines build`` made for a
    swapper (``batch_sizes``: what the caller will send; empty = never compiled), ``eager``
    captures no CUDA graphs, ``cuda_graphs`` leaves them to ``cuda_graphs`` (False when the
    caller captures the engine inside its own graphs)."""
    from livecam.engines.torch_compiled import CompileOptions
    from livecam.engines.torch_engine import TorchEngine

    mode = config.torch_mode
    compile = None
    if mode in ("auto", "compiled") and manifest.kind == "swapper" and batch_sizes:
        compile = CompileOptions(
            engine_cache_dir(config), manifest.name, model_sha256, tuple(sorted(batch_sizes)),
            max_autotune=config.compile_max_autotune, required=mode == "compiled",
            build_if_missing=config.build_if_missing)
    return TorchEngine(model_path, device=device, precision=precision,
                       cuda_graphs=cuda_graphs and mode != "eager", compile=compile)


def create_engine(manifest: ModelManifest, model_path: Path, model_sha256: str,
                  config: EngineConfig, choice: BackendChoice | None = None, *,
                  batch_sizes: tuple[int, ...] = ()) -> Engine:
    """An unopened engine for one model on the chosen (or configured) backend;
    ``batch_sizes`` as :func:`create_torch_engine` (the torch backend only)."""
    choice = choice or choose_backend(config.backend, config.device)
    if choice.name == "triton":
        from livecam.engines.triton_client import TritonEngine

        return TritonEngine(manifest.name, model_sha256=model_sha256, urls=config.triton_urls,
                            timeout_ms=config.triton_timeout_ms,
                            connect_timeout_s=config.triton_connect_timeout_s,
                            reconnect_initial_s=config.triton_reconnect_initial_s,
                            reconnect_max_s=config.triton_reconnect_max_s)
    if choice.name == "onnxruntime":
        from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine

        return OnnxRuntimeEngine(model_path, device=config.device)
    if choice.name == "torch":
        device = config.device
        if device == "auto":
            device = "cuda" if _cuda_available() else "cpu"
        return create_torch_engine(manifest, model_path, model_sha256, config, device=device,
                                   precision=config.precision if device != "cpu" else "fp32",
                                   batch_sizes=batch_sizes)
    from livecam.engines.tensorrt_engine import TensorRTEngine

    precision = "fp32" if config.precision == "fp32" else manifest.trt_precision
    return TensorRTEngine(model_path, model_name=manifest.name, model_sha256=model_sha256,
                          cache_dir=engine_cache_dir(config), precision=precision,
                          profiles=manifest.trt_profiles(), fp32_layers=manifest.trt_fp32_layers,
                          workspace_mb=config.tensorrt_workspace_mb,
                          build_if_missing=config.build_if_missing)

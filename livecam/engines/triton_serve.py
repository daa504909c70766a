"""``livecam engines serve``: the registry's verified models on a Triton Inference Server.

:func:`serve` writes the model repository (:mod:`.triton_repo`), starts ``tritonserver``
(:mod:`.triton_server`), reports the addresses once the server and every model are ready, and
stops the server when ``stop`` is set. The models run inside Triton with the fastest engine
livecam has on this machine (``engine.backend`` auto: TensorRT, then torch with CUDA graphs on
a CUDA GPU, then onnxruntime on the CPU), one instance group per GPU.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from livecam.config import Config
from livecam.engines.registry import choose_backend, engine_cache_dir, model_store
from livecam.engines.triton_repo import ServingPlan, write_repository
from livecam.engines.triton_server import ServerAddress, TritonServeError, TritonServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    """What ``livecam engines serve`` was asked for (see its ``--help``)."""

    models: tuple[str, ...] = ()
    address: ServerAddress = field(default_factory=ServerAddress)
    instances: int = 1
    max_batch: int = 16
    max_queue_delay_us: int = 500
    gpus: tuple[int, ...] | None = None
    repository: str = ""
    tritonserver: str = ""
    warm_up: bool = True


@dataclass(frozen=True)
class Served:
    """A running server as :func:`serve` reports it to ``on_ready``."""

    models: dict[str, str]
    plan: ServingPlan
    address: ServerAddress
    reason: str
    pid: int | None


def _cuda_devices() -> int:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def plan_for(config: Config, options: ServeOptions) -> tuple[ServingPlan, str]:
    """The serving plan on this machine and why that engine runs inside Triton."""
    requested = "auto" if config.engine.backend == "triton" else config.engine.backend
    choice = choose_backend(requested, config.engine.device)
    on_gpu = choice.name in ("tensorrt", "torch") and config.engine.device != "cpu"
    gpus = options.gpus if options.gpus is not None else tuple(range(_cuda_devices()))
    if not on_gpu:
        gpus = ()
    plan = ServingPlan(backend=choice.name, precision=config.engine.precision, gpus=gpus,
                       instances=options.instances, max_batch=options.max_batch,
                       max_queue_delay_us=options.max_queue_delay_us,
                       torch_mode=config.engine.torch_mode,
                       cache_dir=str(engine_cache_dir(config.engine)), warm_up=options.warm_up)
    return plan, choice.reason


def default_models(config: Config) -> tuple[str, ...]:
    """The swap model of ``swap.model`` and its recognizer: what a triton client sends."""
    manifest = model_store(config.models).manifest(config.swap.model)
    return (manifest.name, manifest.recognizer or "w600k_r50")


def serve(config: Config, options: ServeOptions, stop: threading.Event,
          on_ready: Callable[[Served], None]) -> None:
    """Write the repository, start Triton, call ``on_ready`` once it serves every model, and
    return after ``stop`` is set (the server stopped) or raise :class:`TritonServeError` if the
    server ends on its own. Call from one thread; ``stop`` may be set from any thread or a
    signal handler."""
    from livecam.engines.manifest import default_manifests_dir

    names: Sequence[str] = options.models or default_models(config)
    plan, reason = plan_for(config, options)
    store = model_store(config.models)
    manifests_dir = (Path(config.models.manifests_dir).expanduser()
                     if config.models.manifests_dir else default_manifests_dir())
    # one work dir per server (its backends copy and log), so servers on one machine coexist
    port = options.address.grpc_port
    work_dir = engine_cache_dir(config.engine).parent / "triton" / f"grpc-{port}"
    repository = (Path(options.repository).expanduser() if options.repository
                  else work_dir / "repository")
    digests = write_repository(repository, store, manifests_dir, names, plan)
    log.info("model repository written to %s", repository)
    server = TritonServer(repository, names, work_dir=work_dir, address=options.address,
                          binary=options.tritonserver)
    with server:
        on_ready(Served(digests, plan, options.address, reason, server.pid))
        while not stop.wait(0.5):
            code = server.wait(0)
            if code is not None:
                raise TritonServeError(f"tritonserver ended with code {code}: "
                                       f"{server.log_tail()}")

"""A real Triton server for the triton tests: the bundled tritonserver on the CPU, serving the
stand-in inswapper_128 and w600k_r50 (the real weights are downloads) through the same
repository writer and launcher that `livecam engines serve` uses."""

from __future__ import annotations

import platform
import socket
import sys
from pathlib import Path

import pytest

from livecam.engines.manifest import load_manifests
from livecam.engines.store import ModelStore
from livecam.engines.triton_repo import ServingPlan, write_repository
from livecam.engines.triton_server import ServerAddress, TritonServer
from tests.gpupipe.stage_support import install_standin_models

MODELS = ("inswapper_128", "w600k_r50")

# Triton only exists for Linux x86_64/aarch64 (nvidia-pytriton: manylinux x86_64); everywhere
# else these tests cannot have a server and say so.
needs_triton = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64",
    reason="Triton Inference Server (nvidia-pytriton) is built for Linux x86_64 only")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandinDeployment:
    """Stand-in models installed in a models dir, a repository written from them, and
    ``server()`` to build a (not yet started) server on fixed ports, so a test can kill it
    and start another one at the same address. ``max_queue_delay_us``: how long Triton's
    batcher holds a lone request waiting for a second one (its smallest preferred batch)."""

    def __init__(self, root: Path, *, max_queue_delay_us: int = 500) -> None:
        self.root = root
        self.models_dir, self.manifests_dir = install_standin_models(root / "standins")
        self.store = ModelStore(self.models_dir, load_manifests(self.manifests_dir))
        self.plan = ServingPlan(backend="onnxruntime", max_batch=4, warm_up=False,
                                max_queue_delay_us=max_queue_delay_us)
        self.digests = write_repository(root / "repository", self.store, self.manifests_dir,
                                        MODELS, self.plan)
        self.address = ServerAddress(grpc_port=free_port(), http_port=free_port(),
                                     metrics_port=free_port())

    @property
    def url(self) -> str:
        return self.address.grpc_url

    def server(self) -> TritonServer:
        return TritonServer(self.root / "repository", MODELS, work_dir=self.root / "server",
                            address=self.address, ready_timeout_s=240.0)

    def config_overrides(self) -> list[str]:
        """``--set`` values for a livecam run against this deployment."""
        return [f"advanced.models.dir={self.models_dir}",
                f"advanced.models.manifests_dir={self.manifests_dir}",
                "engine.backend=triton", f"advanced.engine.triton_urls=[{self.url}]",
                "advanced.engine.triton_timeout_ms=20000",
                "advanced.engine.triton_connect_timeout_s=60"]

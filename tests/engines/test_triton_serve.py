"""The model repository `livecam engines serve` writes, and the command itself (a real
tritonserver on the CPU, stand-in models; the real weights are downloads)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from livecam.core.errors import ModelError
from livecam.engines.manifest import load_manifests
from livecam.engines.store import ModelStore
from livecam.engines.triton_model import batch_buckets, bucket_for
from livecam.engines.triton_repo import ServingPlan, write_repository
from tests.engines.triton_support import free_port, needs_triton
from tests.gpupipe.stage_support import install_standin_models


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return install_standin_models(tmp_path_factory.mktemp("serve-standins"))


def test_repository_has_batching_instances_and_the_verified_file(
        tmp_path: Path, standins: tuple[Path, Path]) -> None:
    models_dir, manifests_dir = standins
    store = ModelStore(models_dir, load_manifests(manifests_dir))
    plan = ServingPlan(backend="torch", gpus=(0, 1), instances=2, max_batch=16,
                       max_queue_delay_us=700)
    digests = write_repository(tmp_path, store, manifests_dir, ["inswapper_128"], plan)
    text = (tmp_path / "inswapper_128" / "config.pbtxt").read_text()
    assert 'backend: "python"' in text and "max_batch_size: 16" in text
    assert "preferred_batch_size: [ 2, 4, 8, 16 ] max_queue_delay_microseconds: 700" in text
    assert "instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] } ]" in text
    assert '{ name: "target" data_type: TYPE_FP16 dims: [ 3, 128, 128 ] }' in text
    assert f'key: "sha256" value {{ string_value: "{digests["inswapper_128"]}" }}' in text
    version = tmp_path / "inswapper_128" / "1"
    assert (version / "model.onnx").read_bytes() == store.path("inswapper_128").read_bytes()
    assert (version / "model.sha256").read_text().strip() == digests["inswapper_128"]
    assert "TritonPythonModel" in (version / "model.py").read_text()


def test_a_model_file_that_does_not_verify_is_not_served(
        tmp_path: Path, standins: tuple[Path, Path]) -> None:
    _models_dir, manifests_dir = standins
    bad = tmp_path / "models"
    bad.mkdir()
    (bad / "inswapper_128.onnx").write_bytes(b"not the model")
    store = ModelStore(bad, load_manifests(manifests_dir))
    with pytest.raises(ModelError, match="sha256"):
        write_repository(tmp_path / "repo", store, manifests_dir, ["inswapper_128"],
                         ServingPlan(backend="onnxruntime"))
    assert not (tmp_path / "repo" / "inswapper_128").exists()


def test_batches_are_padded_to_a_few_sizes() -> None:
    assert batch_buckets(16) == (1, 2, 4, 8, 16)
    assert batch_buckets(12) == (1, 2, 4, 8, 12)
    assert [bucket_for(n, batch_buckets(12)) for n in (1, 3, 8, 9, 12)] == [1, 4, 8, 12, 12]


@pytest.mark.slow
@needs_triton
def test_serve_command_reports_ready_and_stops_on_sigterm(
        tmp_path: Path, standins: tuple[Path, Path]) -> None:
    models_dir, manifests_dir = standins
    grpc, http, metrics = free_port(), free_port(), free_port()
    cmd = [sys.executable, "-m", "livecam.cli", "engines", "serve", "--grpc-port", str(grpc),
           "--http-port", str(http), "--metrics-port", str(metrics), "--no-warm-up",
           "--max-batch", "4", "--set", f"advanced.models.dir={models_dir}",
           "--set", f"advanced.models.manifests_dir={manifests_dir}"]
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, f"serve ended early: {process.stderr.read() if process.stderr else ''}"
            lines.append(line)
            if line.startswith("ready:"):
                break
        assert f"grpc 127.0.0.1:{grpc}" in lines[-1]
        assert "serving inswapper_128, w600k_r50 with onnxruntime on the CPU" in lines[0]
        # ready means ready: Triton says so for the server and both models
        for path in ("/v2/health/ready", "/v2/models/inswapper_128/ready",
                     "/v2/models/w600k_r50/ready"):
            with urllib.request.urlopen(f"http://127.0.0.1:{http}{path}", timeout=10) as r:
                assert r.status == 200
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0 and out.strip().endswith("stopped")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with pytest.raises(OSError):  # the server went with it
        urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/live", timeout=5)


PROBE_MODEL = '''
import json, sys
from multiprocessing import shared_memory
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        # what failed before the stub got its own libpython: multiprocessing's resource
        # tracker calls RLock._recursion_count, which the system's older libpython lacks
        shm = shared_memory.SharedMemory(create=True, size=64)
        shm.close()
        shm.unlink()
        self.version = sys.version

    def execute(self, requests):
        out = np.frombuffer(self.version.encode(), np.uint8).copy()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("VERSION", out[None])])
                for _ in requests]
'''


@pytest.mark.slow
@needs_triton
def test_python_backend_stub_runs_this_python(tmp_path: Path) -> None:
    import numpy as np

    from livecam.engines.triton_server import ServerAddress, TritonServer

    version_dir = tmp_path / "repo" / "probe" / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "model.py").write_text(PROBE_MODEL)
    (tmp_path / "repo" / "probe" / "config.pbtxt").write_text(
        'name: "probe"\nbackend: "python"\nmax_batch_size: 1\n'
        'input [ { name: "X" data_type: TYPE_UINT8 dims: [ 1 ] } ]\n'
        'output [ { name: "VERSION" data_type: TYPE_UINT8 dims: [ -1 ] } ]\n')
    address = ServerAddress(grpc_port=free_port(), http_port=free_port(),
                            metrics_port=free_port())
    with TritonServer(tmp_path / "repo", ["probe"], work_dir=tmp_path / "server",
                      address=address, ready_timeout_s=120):
        import tritonclient.grpc as grpcclient

        client = grpcclient.InferenceServerClient(address.grpc_url)
        item = grpcclient.InferInput("X", [1, 1], "UINT8")
        item.set_data_from_numpy(np.zeros((1, 1), np.uint8))
        answer = client.infer("probe", [item]).as_numpy("VERSION")[0].tobytes().decode()
        client.close()
    assert answer == sys.version

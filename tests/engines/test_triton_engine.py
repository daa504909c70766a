"""The triton engine against a real Triton Inference Server (the bundled tritonserver, on the
CPU, serving stand-in models through the repository `livecam engines serve` writes)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from livecam.core.errors import EngineUnavailableError, ModelError
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.engines.triton_client import TritonEngine
from tests.engines.triton_support import StandinDeployment, free_port, needs_triton

pytestmark = [pytest.mark.slow, needs_triton]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinDeployment]:
    deployment = StandinDeployment(tmp_path_factory.mktemp("triton"))
    with deployment.server():
        yield deployment


def feeds(rows: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"target": rng.random((rows, 3, 128, 128), dtype=np.float32),
            "source": rng.standard_normal((rows, 512)).astype(np.float32)}


def test_served_model_matches_the_local_engine(deployment: StandinDeployment) -> None:
    local = OnnxRuntimeEngine(deployment.store.path("inswapper_128"), device="cpu")
    remote = TritonEngine("inswapper_128", model_sha256=deployment.digests["inswapper_128"],
                          urls=[deployment.url], timeout_ms=20000)
    with local, remote:
        assert [s.name for s in remote.inputs] == ["target", "source"]
        for rows in (1, 3, 6):  # 6 > max_batch 4: the server splits it
            f = feeds(rows, rows)
            got, want = remote.run(f)["output"], local.run(f)["output"]
            assert got.shape == want.shape == (rows, 3, 128, 128)
            # float16 on the wire: within half a grey level of the float32 result
            assert np.abs(got - want).max() < 0.5 / 255
        health = remote.health()
    assert health["state"] == "ready" and health["failures"] == 0
    # float16 both ways: 3*128*128*2 + 512*2 bytes up and 3*128*128*2 down per face
    assert health["bytes_sent"] == 10 * (3 * 128 * 128 * 2 + 512 * 2)
    assert health["bytes_received"] == 10 * 3 * 128 * 128 * 2


def test_requests_in_flight_together_each_get_their_own_rows(
        deployment: StandinDeployment) -> None:
    local = OnnxRuntimeEngine(deployment.store.path("inswapper_128"), device="cpu")
    remote = TritonEngine("inswapper_128", urls=[deployment.url], timeout_ms=20000)
    with local, remote:
        batches = [feeds(1 + i % 2, 100 + i) for i in range(8)]
        futures = [remote.submit(f) for f in batches]  # all sent before any is answered
        for f, future in zip(batches, futures, strict=True):
            got = future.result(timeout=60)["output"]
            assert np.abs(got - local.run(f)["output"]).max() < 0.5 / 255


def test_a_server_with_another_model_file_is_refused(deployment: StandinDeployment) -> None:
    remote = TritonEngine("inswapper_128", model_sha256="0" * 64, urls=[deployment.url])
    with pytest.raises(ModelError, match=r"serves inswapper_128 with sha256 .* this machine has"):
        remote.open()


def test_no_server_is_one_error_naming_the_address_and_serve() -> None:
    url = f"127.0.0.1:{free_port()}"
    remote = TritonEngine("inswapper_128", urls=[url], connect_timeout_s=0.5)
    with pytest.raises(EngineUnavailableError) as info:
        remote.open()
    text = str(info.value)
    assert "\n" not in text and url in text and "livecam engines serve" in text


def test_down_server_fails_requests_at_once_and_the_engine_reconnects(
        tmp_path: Path) -> None:
    deployment = StandinDeployment(tmp_path)
    remote = TritonEngine("inswapper_128", urls=[deployment.url], timeout_ms=20000,
                          reconnect_initial_s=0.05, reconnect_max_s=0.5)
    f = feeds(1, 0)
    with deployment.server() as server:
        remote.open()
        before = remote.run(f)["output"]
        server.close()
        with pytest.raises(EngineUnavailableError):
            remote.run(f)
        assert remote.health()["state"] == "down"
        with pytest.raises(EngineUnavailableError, match="reconnecting"):
            remote.run(f)  # no wait: the prober owns the reconnection
    back = threading.Event()
    with deployment.server():
        for _ in range(600):
            if remote.health()["state"] == "ready":
                back.set()
                break
            back.wait(0.1)
        assert back.is_set(), remote.health()
        assert np.array_equal(remote.run(f)["output"], before)
        assert remote.health()["reconnects"] == 1
    remote.close()

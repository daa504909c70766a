"""``LazyEngine`` / ``LazyTorchEngine``: the one engine made on first use, for the CPU swap's
models and the GPU pipeline's generator and enhancer (real torch and onnxruntime engines on
the stand-in recognizer)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from livecam.engines.lazy import LazyEngine, LazyTorchEngine
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.engines.torch_engine import TorchEngine


def _feeds() -> dict[str, np.ndarray]:
    return {"input.1": np.random.default_rng(1).uniform(-1, 1, (1, 3, 112, 112))
            .astype(np.float32)}


def test_made_once_on_first_use_and_closed_only_when_made(arcface_path: Path) -> None:
    made: list[OnnxRuntimeEngine] = []

    def make() -> OnnxRuntimeEngine:
        made.append(OnnxRuntimeEngine(arcface_path, device="cpu"))
        return made[-1]

    lazy = LazyEngine("onnxruntime", make)
    lazy.close()  # never used: nothing is made to be closed
    assert made == []
    lazy.open()
    out = lazy.run(_feeds())
    assert out["683"].shape == (1, 512)
    assert [spec.name for spec in lazy.inputs] == ["input.1"]
    assert len(made) == 1 and lazy.engine is made[0]
    assert lazy.health() is None  # a local engine has no link
    with pytest.raises(TypeError, match="onnxruntime engine runs one request at a time"):
        lazy.submit(_feeds())
    lazy.close()


def test_a_failing_make_fails_at_open(tmp_path: Path) -> None:
    def make() -> OnnxRuntimeEngine:
        raise FileNotFoundError("model standin is not installed")

    lazy = LazyEngine("onnxruntime", make)  # wiring is cheap: make is not called
    with pytest.raises(FileNotFoundError, match="not installed"):
        lazy.open()


def test_torch_engine_stands_in_and_logs_what_runs(arcface_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    lazy = LazyTorchEngine("torch", lambda: TorchEngine(arcface_path, device="cpu",
                                                        precision="fp32"),
                           label="GPU pipeline generator")
    with caplog.at_level(logging.INFO, logger="livecam.engines.lazy"):
        lazy.open()
    try:
        assert "GPU pipeline generator: eager" in caplog.text
        assert lazy.device.type == "cpu"
        assert lazy.cuda_graphs is lazy.engine.cuda_graphs
        import torch

        feeds = {k: torch.from_numpy(v) for k, v in _feeds().items()}
        torch_out = lazy.run_torch(feeds)["683"]
        np.testing.assert_allclose(torch_out.numpy(), lazy.run(_feeds())["683"], atol=1e-5)
    finally:
        lazy.close()

"""Backend choice: auto explains itself; an unavailable backend is an error, not a fallback."""

from __future__ import annotations

import importlib.util

import pytest

from livecam.core.errors import DependencyError
from livecam.engines.registry import choose_backend, probe_backends


def test_auto_picks_a_backend_and_says_why() -> None:
    choice = choose_backend("auto")
    status = probe_backends()
    assert status[choice.name][0]
    assert choice.reason.startswith("auto:")
    if not status["tensorrt"][0] and status["torch"][1] != "on a CUDA GPU":
        assert choice.name == "onnxruntime"  # this machine: no TensorRT, no CUDA


def test_asking_for_an_unavailable_backend_names_what_to_install() -> None:
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here, so it is not unavailable")
    with pytest.raises(DependencyError, match="pip install tensorrt"):
        choose_backend("tensorrt")


def test_torch_on_cpu_only_when_asked() -> None:
    assert choose_backend("torch", device="cpu").name == "torch"
    assert choose_backend("onnxruntime", device="cpu").name == "onnxruntime"
    with pytest.raises(DependencyError, match="unknown engine backend"):
        choose_backend("openvino")


@pytest.mark.parametrize("sets, build", [
    ((), False),
    (("advanced.engine.build_if_missing=true",), True),
    (("advanced.engine.tensorrt_build_if_missing=true",), True),  # old names: the same key
    (("advanced.engine.compile_if_missing=true",), True),
])
def test_tensorrt_and_the_compiled_torch_generator_build_at_start_by_one_rule(
        sets: tuple[str, ...], build: bool) -> None:
    """Issue 43: "build a missing compiled engine at start" is one key with one default for
    both backends (they disagreed: TensorRT built, torch did not). The engines are only
    constructed: TensorRT and CUDA are not on this machine, and nothing is opened."""
    from pathlib import Path

    from livecam.config import load_config
    from livecam.engines.registry import BackendChoice, create_engine, model_store
    from livecam.engines.tensorrt_engine import TensorRTEngine
    from livecam.engines.torch_engine import TorchEngine

    config = load_config(None, list(sets))
    manifest = model_store(config.models).manifest("inswapper_128")
    model, digest = Path("inswapper_128.onnx"), "0" * 64
    tensorrt = create_engine(manifest, model, digest, config.engine,
                             BackendChoice("tensorrt", "asked"))
    torch = create_engine(manifest, model, digest, config.engine, BackendChoice("torch", "asked"),
                          batch_sizes=(1,))
    assert isinstance(tensorrt, TensorRTEngine) and isinstance(torch, TorchEngine)
    assert torch.compile is not None
    assert tensorrt.build_if_missing is build
    assert torch.compile.build_if_missing is build

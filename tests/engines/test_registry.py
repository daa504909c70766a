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

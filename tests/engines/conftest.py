"""Stand-in models built by the tests themselves (the real weights are downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.standins import build_arcface, build_inswapper


@pytest.fixture(scope="session")
def inswapper_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_inswapper(tmp_path_factory.mktemp("models") / "inswapper_128.onnx")


@pytest.fixture(scope="session")
def inswapper_dynamic_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_inswapper(tmp_path_factory.mktemp("models") / "inswapper_dyn.onnx", batch="N")


@pytest.fixture(scope="session")
def arcface_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_arcface(tmp_path_factory.mktemp("models") / "w600k_r50.onnx")

"""NeuralModels: one typed object for the neural swap's models, used by the CPU stage and the
GPU pipeline; `swap.model` is any swapper manifest in the manifests dir."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from livecam.app import gpu_sections
from livecam.config import load_config
from livecam.core.errors import ConfigError, ModelError
from livecam.engines.manifest import default_manifests_dir
from tests.helpers.sections import models_of


def _manifests(tmp_path: Path) -> Path:
    root = tmp_path / "manifests"
    shutil.copytree(default_manifests_dir(), root)
    return root


def test_a_manifest_dropped_in_the_manifests_dir_is_selectable(tmp_path: Path) -> None:
    root = _manifests(tmp_path)
    data = yaml.safe_load((root / "inswapper_128.yaml").read_text())
    data.update(name="my_swapper", file="my_swapper.onnx")
    (root / "my_swapper.yaml").write_text(yaml.safe_dump(data))
    config = load_config(None, ["swap.mode=neural", "swap.model=my_swapper",
                                f"advanced.models.manifests_dir={root}",
                                f"advanced.models.dir={tmp_path}"])
    models = models_of(config)
    assert models.swapper.name == "my_swapper" and models.recognizer.name == "w600k_r50"
    assert models.swapper_path == tmp_path / "my_swapper.onnx"
    with pytest.raises(ModelError, match="livecam models fetch my_swapper"):
        models.require()


def test_an_unknown_model_lists_the_swappers_available(tmp_path: Path) -> None:
    config = load_config(None, ["swap.mode=neural", "swap.model=simswap"])
    with pytest.raises(ConfigError) as caught:
        models_of(config)
    message = str(caught.value)
    assert "swap.model" in message and "'simswap'" in message
    assert "inswapper_128, inswapper_128_fp16" in message
    assert "w600k_r50" not in message.split("available")[1]  # a recognizer is no swapper


def test_livecam_run_refuses_an_unknown_model_in_one_line(tmp_path: Path,
                                                          astronaut_bgr: np.ndarray) -> None:
    import subprocess
    import sys

    import cv2

    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)  # an identity, so that swap stages are built
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", "synthetic", "--output", "null",
         "--source", str(photo), "--set", "swap.mode=neural", "--set", "swap.model=simswap",
         "--set", "advanced.gpu.pipeline=never"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "swap.model: 'simswap'" in result.stderr and "inswapper_128" in result.stderr
    assert "Traceback" not in result.stderr


def test_compiled_batch_sizes_follow_the_path() -> None:
    config = load_config(None, ["analysis.max_faces=6", "advanced.engine.max_batch=8"])
    models = models_of(config)
    assert models.generator_batch_sizes(gpu_pipeline=True) == (1, 2, 4, 6)
    assert models.generator_batch_sizes(gpu_pipeline=False) == (1, 2, 4, 8)
    pinned = replace(models, engine=replace(models.engine, compiled_batch_sizes=(16, 1, 16)))
    assert pinned.generator_batch_sizes(gpu_pipeline=True) == (1, 16)


def test_a_zero_batch_size_is_a_config_error() -> None:
    config = load_config(None, ["advanced.engine.compiled_batch_sizes=[0, 2]"])
    with pytest.raises(ConfigError, match="compiled_batch_sizes"):
        models_of(config)


def test_both_paths_build_from_the_same_object(tmp_path: Path) -> None:
    """The CPU stage and the GPU stage take their swapper, recognizer and model checks from
    NeuralModels (a missing model names the fetch command in both)."""
    from livecam.gpupipe.factory import build_gpu_stages
    from livecam.identity.model import IdentityCollection
    from livecam.swap.neural import build_neural_stage

    config = load_config(None, ["swap.mode=neural", f"advanced.models.dir={tmp_path}",
                                "advanced.engine.device=cpu", "engine.backend=onnxruntime",
                                "advanced.gpu.pipeline=always"])
    models = models_of(config)
    cpu_stage = build_neural_stage(models, lambda name: None)
    *_, gpu_stage = build_gpu_stages(gpu_sections(config), IdentityCollection({}))
    for stage in (cpu_stage, gpu_stage):
        with pytest.raises(ModelError, match="livecam models fetch inswapper_128"):
            stage.open()


def test_the_models_are_built_from_their_sections_not_the_whole_config() -> None:
    """Issue 43: the models and engine sections, and the model's name, are handed over by the
    composition root; a whole config is refused."""
    from livecam.swap.neural_models import NeuralModels

    config = load_config(None, ["swap.model=inswapper_128_fp16"])
    with pytest.raises(TypeError, match=r"models and engine sections \(config.models, "
                                        r"config.engine\), not Config and EngineConfig"):
        NeuralModels.from_sections(config, config.engine,  # type: ignore[arg-type]
                                   model=config.swap.model)
    models = NeuralModels.from_sections(config.models, config.engine, model=config.swap.model,
                                        max_faces=3)
    assert (models.swapper.name, models.max_faces) == ("inswapper_128_fp16", 3)

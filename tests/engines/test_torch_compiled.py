"""The compiled generator, end to end on the CPU: `livecam engines build` compiles the installed
(stand-in) swapper into the engine cache; the torch engine then loads the package without
compiling, matches the ONNX executor and onnxruntime, and never loads a package built for
another key. The build is one AOTInductor compile of a small stand-in (~1-2 min on 2 cores)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from livecam.app import gpu_sections
from livecam.config import Config, load_config
from livecam.core.errors import ModelError
from livecam.engines.engine_cache import EngineCache
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.engines.torch_compiled import CompileOptions
from livecam.engines.torch_engine import TorchEngine
from livecam.identity.model import IdentityCollection
from tests.gpupipe.stage_support import install_standin_models
from tests.helpers.sections import models_of

pytestmark = pytest.mark.slow
BATCHES = (2,)


@dataclass(frozen=True)
class Built:
    config: Config
    cache: EngineCache
    onnx_path: Path
    sha256: str
    build_output: str


def _config(root: Path, models_dir: Path, manifests_dir: Path, *extra: str) -> Config:
    return load_config(None, [f"advanced.models.dir={models_dir}",
                              f"advanced.models.manifests_dir={manifests_dir}",
                              f"advanced.engine.cache_dir={root / 'cache'}", "engine.backend=torch",
                              "advanced.engine.device=cpu",
                              "advanced.engine.compiled_batch_sizes=[2]",
                              "advanced.gpu.pipeline=never", *extra])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("compiled")
    models_dir, manifests_dir = install_standin_models(root)
    sets = [f"advanced.models.dir={models_dir}", f"advanced.models.manifests_dir={manifests_dir}",
            f"advanced.engine.cache_dir={root / 'cache'}", "engine.backend=torch",
            "advanced.engine.device=cpu",
            "advanced.engine.compiled_batch_sizes=[2]", "advanced.gpu.pipeline=never"]
    args = [a for s in sets for a in ("--set", s)]
    result = subprocess.run([sys.executable, "-m", "livecam.cli", "engines", *args, "build",
                             "inswapper_128"], capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-2000:]
    config = _config(root, models_dir, manifests_dir)
    models = models_of(config)
    return Built(config, EngineCache(root / "cache"), models.swapper_path,
                 models.store.verify("inswapper_128"), result.stdout + result.stderr)


def _feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    source = rng.standard_normal((batch, 512)).astype(np.float32)
    return {"target": rng.random((batch, 3, 128, 128), dtype=np.float32),
            "source": source / np.linalg.norm(source, axis=1, keepdims=True)}


def _options(built: Built, **changes: object) -> CompileOptions:
    options = CompileOptions(built.cache.root, "inswapper_128", built.sha256, BATCHES,
                             required=True)
    return replace(options, **changes)  # type: ignore[arg-type]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_build_made_one_entry_per_batch_and_list_shows_it(built: Built) -> None:
    entries = built.cache.entries()
    assert [e.key.kind for e in entries] == ["torch-compiled"]
    assert entries[0].key.batch == 2 and entries[0].key.precision == "fp32"  # type: ignore
    listed = subprocess.run([sys.executable, "-m", "livecam.cli", "engines", "--set",
                             f"advanced.engine.cache_dir={built.cache.root}", "list"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "compiled torch" in listed.stdout
    assert "batch 2" in listed.stdout


def test_compiled_matches_the_executor_and_onnxruntime(built: Built) -> None:
    with TorchEngine(built.onnx_path, device="cpu", precision="fp32",
                     compile=_options(built)) as compiled, \
            TorchEngine(built.onnx_path, device="cpu", precision="fp32") as eager, \
            OnnxRuntimeEngine(built.onnx_path, device="cpu") as ort:
        assert compiled.mode == "compiled"
        # 1: padded into the batch-2 graph; 3: a chunk of 2 and a padded chunk of 1
        for batch in (1, 2, 3):
            feeds = _feeds(batch, seed=batch)
            ours = compiled.run(feeds)["output"]
            assert ours.shape == (batch, 3, 128, 128)
            assert _rel(ours, eager.run(feeds)["output"]) <= 1e-4
            assert _rel(ours, ort.run(feeds)["output"]) <= 1e-4


def test_a_later_start_loads_without_compiling(built: Built, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """A start takes the build's code from Inductor's cache in the engine cache (wherever the
    user's own TORCHINDUCTOR_CACHE_DIR points): hits only, no miss, nothing compiled."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    before = dict(counters["inductor"])
    engine = TorchEngine(built.onnx_path, device="cpu", precision="fp32",
                         compile=_options(built, build_if_missing=True))
    with caplog.at_level(logging.INFO, logger="livecam.engines"), engine:
        assert engine.mode == "compiled"
        opened = dict(counters["inductor"])
        # the first frames compile nothing either (a recompile would hit or miss the cache)
        engine.run(_feeds(2))
        engine.run(_feeds(1))
        assert dict(counters["inductor"]) == opened
    assert opened.get("fxgraph_cache_miss", 0) == before.get("fxgraph_cache_miss", 0)
    assert opened.get("fxgraph_cache_hit", 0) > before.get("fxgraph_cache_hit", 0)
    assert "compiling" not in caplog.text and "loaded from the cache" in caplog.text
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "elsewhere")


@pytest.mark.parametrize("change", ["model", "batch", "executor"])
def test_a_build_for_another_key_never_loads(built: Built, change: str,
                                               monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    import livecam.engines.torch_compiled as tc

    options = _options(built)
    if change == "model":
        options = replace(options, model_sha256="ab" * 32)
    elif change == "batch":
        options = replace(options, batch_sizes=(4,))
    else:  # an edited executor: packages traced through the old one are stale
        monkeypatch.setattr(tc, "executor_sha256", lambda: "cd" * 32)
    with pytest.raises(ModelError, match=r"livecam engines build inswapper_128"):
        TorchEngine(built.onnx_path, device="cpu", precision="fp32", compile=options).open()
    # auto (not required): falls back to the executor and says why
    with caplog.at_level(logging.INFO, logger="livecam.engines.torch_engine"), TorchEngine(
            built.onnx_path, device="cpu", precision="fp32",
            compile=replace(options, required=False)) as engine:
        assert engine.mode == "eager"
    assert "livecam engines build inswapper_128" in caplog.text


def test_a_modified_entry_is_refused(built: Built, tmp_path: Path) -> None:
    import shutil

    copy = EngineCache(tmp_path / "cache")
    shutil.copytree(built.cache.root, copy.root, dirs_exist_ok=True)
    (entry,) = copy.entries()
    with entry.engine_path.open("r+b") as f:
        f.seek(10)
        f.write(b"\0\1\2\3")
    with pytest.raises(ModelError, match="livecam engines build"):
        TorchEngine(built.onnx_path, device="cpu", precision="fp32",
                    compile=_options(built, cache_dir=copy.root)).open()


def test_the_cpu_neural_path_runs_the_build_when_torch_mode_is_compiled(built: Built) -> None:
    config = replace(built.config, engine=replace(built.config.engine, torch_mode="compiled"))
    engine = models_of(config).generator_engine(gpu_pipeline=False)
    assert isinstance(engine, TorchEngine)
    with engine:
        assert engine.mode == "compiled"


def test_the_gpu_pipeline_factory_runs_the_build(built: Built) -> None:
    from livecam.app import SharedStages
    from livecam.gpupipe.factory import build_gpu_stages

    config = replace(built.config, engine=replace(built.config.engine, torch_mode="compiled"),
                     gpu=replace(built.config.gpu, pipeline="always"),
                     analysis=replace(built.config.analysis, max_faces=2))
    neural = replace(config, swap=replace(config.swap, mode="neural"))
    *_, stage = build_gpu_stages(gpu_sections(neural),
                                 identities=IdentityCollection({}), shared=SharedStages())
    generator = stage.hub.generator  # type: ignore[attr-defined]
    generator.open()
    try:
        assert generator.engine.mode == "compiled"
    finally:
        generator.close()


def test_a_build_from_another_graph_is_refused(built: Built,
                                               monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """The entry records the flattened graph's digest: a start whose executor flattens to
    another graph (an op changed without a key change) is refused before compiling, with the
    way out; without ``required`` it runs the executor and says why."""
    import livecam.engines.torch_compiled as tc

    monkeypatch.setattr(tc, "graph_digest", lambda _flat: "ef" * 32)
    monkeypatch.setattr(tc, "compile_flat", lambda *_a: pytest.fail("compiled"))
    with pytest.raises(ModelError, match=r"built from another graph.*livecam engines build"):
        TorchEngine(built.onnx_path, device="cpu", precision="fp32",
                    compile=_options(built)).open()
    with caplog.at_level(logging.WARNING, logger="livecam.engines.torch_engine"), TorchEngine(
            built.onnx_path, device="cpu", precision="fp32",
            compile=_options(built, required=False)) as engine:
        assert engine.mode == "eager"
    assert "built from another graph" in caplog.text

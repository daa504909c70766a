"""TensorRT builds and runs: only where TensorRT and a CUDA GPU exist (neither is here, nor on
the device machine at the time of writing); the key logic is tested in test_engine_cache.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.tensorrt


def _need_tensorrt() -> None:
    pytest.importorskip("tensorrt", reason="TensorRT is not importable on this machine")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("TensorRT needs a CUDA GPU; none is visible")


def test_build_cache_and_reload(tmp_path: Path, inswapper_dynamic_path: Path) -> None:
    _need_tensorrt()
    from livecam.engines.engine_cache import EngineCache, Profile
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.engines.store import sha256_file
    from livecam.engines.tensorrt_engine import TensorRTEngine

    profile = Profile.for_batch({"target": (3, 128, 128), "source": (512,)}, 1, 2, 4)
    kwargs = dict(model_name="standin", model_sha256=sha256_file(inswapper_dynamic_path),
                  cache_dir=tmp_path, precision="fp16", profiles=(profile,))
    rng = np.random.default_rng(0)
    feeds = {"target": rng.random((2, 3, 128, 128), dtype=np.float32),
             "source": rng.standard_normal((2, 512)).astype(np.float32) / 22}
    with TensorRTEngine(inswapper_dynamic_path, **kwargs) as engine:  # type: ignore[arg-type]
        out = engine.run(feeds)["output"]
    assert len(EngineCache(tmp_path).entries()) == 1
    assert EngineCache(tmp_path).timing_cache_path.is_file()
    with OnnxRuntimeEngine(inswapper_dynamic_path, device="cpu") as ref_engine:
        ref = ref_engine.run(feeds)["output"]
    assert np.abs(out - ref).max() / np.abs(ref).max() <= 1e-2
    # a second open loads the cached engine instead of building
    with TensorRTEngine(inswapper_dynamic_path, build_if_missing=False,  # type: ignore[arg-type]
                        **kwargs) as engine:
        np.testing.assert_allclose(engine.run(feeds)["output"], out, atol=1e-3)

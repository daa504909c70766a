"""torch backend (our ONNX executor, CPU here) against onnxruntime on the stand-ins.

Relative error = max |torch - onnxruntime| / max |onnxruntime| over the whole output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.engines.torch_engine import TorchEngine


def _rel_error(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(ours - ref).max() / np.abs(ref).max())


def _inswapper_feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    source = rng.standard_normal((batch, 512)).astype(np.float32)
    return {"target": rng.random((batch, 3, 128, 128), dtype=np.float32),
            "source": source / np.linalg.norm(source, axis=1, keepdims=True)}


@pytest.mark.parametrize(("precision", "limit"), [("fp32", 1e-4), ("fp16", 1e-2)])
def test_torch_matches_onnxruntime_on_inswapper(inswapper_path: Path, precision: str,
                                                 limit: float) -> None:
    feeds = _inswapper_feeds(1)
    with OnnxRuntimeEngine(inswapper_path, device="cpu") as ref_engine:
        ref = ref_engine.run(feeds)["output"]
    with TorchEngine(inswapper_path, device="cpu", precision=precision) as engine:
        ours = engine.run(feeds)["output"]
    assert ours.shape == ref.shape == (1, 3, 128, 128)
    assert ours.dtype == np.float32
    error = _rel_error(ours, ref)
    assert error <= limit, f"{precision}: relative error {error:.2e} > {limit:.0e}"
    # the output depends on the source latent (a broken AdaIN path would ignore it)
    other = dict(feeds, source=_inswapper_feeds(1, seed=5)["source"])
    with OnnxRuntimeEngine(inswapper_path, device="cpu") as ref_engine:
        assert np.abs(ref_engine.run(other)["output"] - ref).max() > 1e-3


@pytest.mark.parametrize(("precision", "limit"), [("fp32", 1e-4), ("fp16", 1e-2)])
def test_torch_matches_onnxruntime_on_arcface(arcface_path: Path, precision: str,
                                               limit: float) -> None:
    rng = np.random.default_rng(1)
    feeds = {"input.1": rng.uniform(-1, 1, (2, 3, 112, 112)).astype(np.float32)}
    with OnnxRuntimeEngine(arcface_path, device="cpu") as ref_engine:
        ref = ref_engine.run(feeds)["683"]
    with TorchEngine(arcface_path, device="cpu", precision=precision) as engine:
        ours = engine.run(feeds)["683"]
    assert ours.shape == (2, 512)
    assert _rel_error(ours, ref) <= limit


@pytest.mark.slow  # the inswapper-sized stand-in through torch, row by row
def test_batched_call_equals_rows(inswapper_dynamic_path: Path) -> None:
    feeds = _inswapper_feeds(3, seed=2)
    with TorchEngine(inswapper_dynamic_path, device="cpu", precision="fp32") as engine:
        batched = engine.run(feeds)["output"]
        rows = [engine.run({k: v[i:i + 1] for k, v in feeds.items()})["output"]
                for i in range(3)]
    np.testing.assert_allclose(batched, np.concatenate(rows), atol=1e-5)


def test_onnxruntime_splits_batches_for_a_static_batch_model(inswapper_path: Path) -> None:
    feeds = _inswapper_feeds(2, seed=3)
    with OnnxRuntimeEngine(inswapper_path, device="cpu") as engine:
        assert engine.max_batch == 1
        both = engine.run(feeds)["output"]
        second = engine.run({k: v[1:] for k, v in feeds.items()})["output"]
    np.testing.assert_allclose(both[1:], second, atol=1e-6)


def test_wrong_input_shape_is_a_value_error(inswapper_path: Path) -> None:
    with TorchEngine(inswapper_path, device="cpu", precision="fp32") as engine, \
            pytest.raises(ValueError, match="target"):
        engine.run({"target": np.zeros((1, 3, 64, 64), np.float32),
                    "source": np.zeros((1, 512), np.float32)})


def test_unsupported_op_is_named_at_load(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("NonMaxSuppression", ["x", "y"], ["z"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4]),
                      helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1])],
        [helper.make_tensor_value_info("z", TensorProto.INT64, [1, 3])])
    path = tmp_path / "nms.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(NotImplementedError, match="NonMaxSuppression"):
        TorchEngine(path, device="cpu", precision="fp32").open()


@pytest.mark.gpu
def test_cuda_graphs_replay_matches_eager(inswapper_dynamic_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available (the device machine runs this)")
    feeds = _inswapper_feeds(4, seed=4)
    with TorchEngine(inswapper_dynamic_path, device="cuda", precision="fp16",
                     cuda_graphs=False) as eager:
        ref = eager.run(feeds)["output"]
    with TorchEngine(inswapper_dynamic_path, device="cuda", precision="fp16",
                     cuda_graphs=True) as graphed:
        stream = torch.cuda.Stream()
        graphed.run(feeds)  # capture
        out = graphed.run_torch({k: torch.from_numpy(v).cuda() for k, v in feeds.items()},
                                stream=stream)["output"]
        stream.synchronize()
    np.testing.assert_allclose(out.float().cpu().numpy(), ref, atol=2e-3)

"""The torch executor's instance-norm / AdaIN fusion (livecam.engines.torch_fuse): same outputs
as the node-by-node chain, and no fusion where an intermediate is read elsewhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from livecam.engines.torch_graph import OnnxGraphModule, load_onnx  # noqa: E402
from tests.helpers.standins import build_inswapper  # noqa: E402


def _instance_norm_graph(path: Path, *, leak_centred: bool) -> Path:
    """x -> ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Div; with ``leak_centred`` the centred
    tensor is also a graph output (so the chain must not be fused)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["c"]),
        helper.make_node("Mul", ["c", "c"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["v"], axes=[2, 3], keepdims=1),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
        helper.make_node("Div", ["c", "s"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 5, 6])]
    if leak_centred:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, ["N", 4, 5, 6]))
    graph = helper.make_graph(
        nodes, "inorm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 5, 6])],
        outputs, [numpy_helper.from_array(np.array(1e-5, np.float32), "eps")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


def test_adain_chains_fuse_and_match(tmp_path: Path) -> None:
    model = load_onnx(build_inswapper(tmp_path / "s.onnx", size="small", batch="N"))
    fused = OnnxGraphModule(model, fuse=True)
    plain = OnnxGraphModule(model, fuse=False)
    assert fused.fused == 4  # 2 residual blocks x 2 AdaIN each in the small stand-in
    assert len(fused._nodes) < len(plain._nodes)
    gen = torch.Generator().manual_seed(3)
    target = torch.rand((3, 3, 128, 128), generator=gen)
    source = torch.randn((3, 512), generator=gen)
    with torch.no_grad():
        a = fused(target, source)[0]
        b = plain(target, source)[0]
    assert float((a - b).norm() / b.norm()) < 1e-5


def test_instance_norm_without_affine(tmp_path: Path) -> None:
    model = load_onnx(_instance_norm_graph(tmp_path / "in.onnx", leak_centred=False))
    module = OnnxGraphModule(model)
    assert module.fused == 1
    x = torch.randn((2, 4, 5, 6)) * 3 + 1
    with torch.no_grad():
        y = module(x)[0]
    ref = torch.nn.functional.instance_norm(x, eps=1e-5)
    assert float((y - ref).abs().max()) < 1e-5


def test_no_fusion_when_an_intermediate_is_read_elsewhere(tmp_path: Path) -> None:
    model = load_onnx(_instance_norm_graph(tmp_path / "leak.onnx", leak_centred=True))
    module = OnnxGraphModule(model)
    assert module.fused == 0
    x = torch.randn((2, 4, 5, 6))
    with torch.no_grad():
        y, c = module(x)
    assert torch.allclose(c, x - x.mean(dim=(2, 3), keepdim=True), atol=1e-6)
    assert torch.allclose(y, torch.nn.functional.instance_norm(x, eps=1e-5), atol=1e-5)

"""What the torch executor does not implement is refused when the model loads, naming the
node, the op and the attribute: never computed differently from onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from livecam.core.errors import ModelError
from livecam.engines.torch_graph import OnnxGraphModule
from tests.engines.ops.onnx_case import load_error, model

X = np.ones((1, 2, 4, 4), np.float32)


def test_an_attribute_the_op_does_not_declare_is_refused() -> None:
    message = load_error("LeakyRelu", [("x", X)], opset=16, alpha=0.1, beta=2.0)
    assert "LeakyRelu_0" in message and "beta=2.0" in message


def test_an_op_of_another_domain_is_refused() -> None:
    onnx_model = model("Relu", [("x", X)], opset=16)
    onnx_model.graph.node[0].domain = "com.microsoft"
    onnx_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(NotImplementedError, match=r"Relu_0.*com\.microsoft"):
        OnnxGraphModule(onnx_model)


def test_an_unknown_op_is_named_with_its_node() -> None:
    message = load_error("NonMaxSuppression", [("x", X)], opset=16)
    assert "NonMaxSuppression" in message and "NonMaxSuppression_0" in message


def test_an_opset_before_7_is_refused() -> None:
    with pytest.raises(ModelError, match="opset 6"):
        OnnxGraphModule(model("Relu", [("x", X)], opset=6))


def test_the_error_is_a_model_error_and_not_implemented() -> None:
    onnx_model = model("Pad", [("x", X), ("p", np.zeros(8, np.int64))], opset=19, consts=("p",),
                       mode="circular")
    with pytest.raises(ModelError) as caught:
        OnnxGraphModule(onnx_model)
    assert isinstance(caught.value, NotImplementedError)
    assert "Pad_0" in str(caught.value) and "mode='circular'" in str(caught.value)


def test_a_node_folded_at_load_is_checked_too() -> None:
    # every input is an initializer, so the node is evaluated at load: still checked first
    message = load_error("Pad", [("x", X), ("p", np.zeros(8, np.int64))], opset=11,
                         consts=("x", "p"), mode="wrap")
    assert "Pad_0" in message and "wrap" in message


def test_wrap_padding_needs_opset_19() -> None:
    message = load_error("Pad", [("x", X), ("p", np.ones(8, np.int64))], opset=18,
                         consts=("p",), mode="wrap")
    assert "mode='wrap'" in message


def test_negative_pads_in_reflect_mode_are_refused() -> None:
    message = load_error("Pad", [("x", X), ("p", np.array([0, 0, -1, 1, 0, 0, 1, 1]))],
                         opset=13, consts=("p",), mode="reflect")
    assert "Pad_0" in message and "pads" in message


def test_a_cast_to_string_is_refused() -> None:
    message = load_error("Cast", [("x", X)], opset=13, to=TensorProto.STRING)
    assert "Cast_0" in message and "to=8" in message


def test_int_reduce_mean_is_refused() -> None:
    message = load_error("ReduceMean", [("x", np.ones((2, 3), np.int64))], opset=13, axes=[1])
    assert "ReduceMean_0" in message and "int64" in message


def test_a_string_constant_is_refused() -> None:
    node = helper.make_node("Constant", [], ["c"], name="const_s",
                            value_string="hello")
    graph = helper.make_graph([node, helper.make_node("Identity", ["c"], ["y"], name="id")],
                              "g", [], [helper.make_empty_tensor_value_info("y")])
    with pytest.raises(ModelError, match="const_s"):
        OnnxGraphModule(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))

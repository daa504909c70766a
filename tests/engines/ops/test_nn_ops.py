"""Convolutions, Gemm, normalisations and Pad of the torch executor against onnx.reference:
groups, dilations, strides, explicit and automatic padding, transposes, pad modes and the
opset differences of Pad (attributes, inputs, axes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.engines.ops.onnx_case import compare, load_error

RNG = np.random.default_rng(2)
SETTINGS = settings(max_examples=30, deadline=None)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@st.composite
def conv_case(draw: st.DrawFn) -> dict:
    spatial = draw(st.sampled_from([1, 2, 2, 3]))
    group = draw(st.sampled_from([1, 1, 2, 3]))
    c_in, c_out = group * draw(st.integers(1, 2)), group * draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(spatial)]
    dilations = [draw(st.integers(1, 2)) for _ in range(spatial)]
    size = [draw(st.integers(5, 8)) for _ in range(spatial)]
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]))
    if auto_pad.startswith("SAME"):  # refused with dilations (no reference computes it)
        dilations = [1] * spatial
    attrs: dict = {"group": group, "strides": strides, "dilations": dilations,
                   "kernel_shape": kernel}
    if auto_pad == "NOTSET":
        if draw(st.booleans()):
            attrs["pads"] = [draw(st.integers(0, 2)) for _ in range(2 * spatial)]
    else:
        attrs["auto_pad"] = auto_pad
    return {"x": (draw(st.integers(1, 2)), c_in, *size),
            "w": (c_out, c_in // group, *kernel), "bias": draw(st.booleans()), "attrs": attrs}


@SETTINGS
@given(case=conv_case())
def test_conv(case: dict) -> None:
    inputs = [("x", _x(*case["x"])), ("w", _x(*case["w"]))]
    if case["bias"]:
        inputs.append(("b", _x(case["w"][0])))
    # onnx.reference sizes VALID outputs and splits SAME_LOWER pads unlike the operator's
    # definition (e.g. VALID, kernel 2 on 5 pixels: 5 outputs, not 4); onnxruntime follows it
    auto = "auto_pad" in case["attrs"]
    compare("Conv", inputs, opset=11, consts=("w", "b"), rtol=1e-4, atol=1e-4,
            reference="onnxruntime" if auto else "onnx", **case["attrs"])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_same_padding_with_dilations_is_refused(auto_pad: str) -> None:
    message = load_error("Conv", [("x", _x(1, 2, 6, 6)), ("w", _x(4, 2, 3, 3))], opset=11,
                         consts=("w",), auto_pad=auto_pad, dilations=[2, 2])
    assert "Conv_0" in message and "dilations" in message


def test_conv_without_kernel_shape_and_weights_as_input() -> None:
    compare("Conv", [("x", _x(1, 2, 6, 6)), ("w", _x(4, 2, 3, 3))], opset=11, pads=[1, 0, 0, 1],
            rtol=1e-4, atol=1e-4)


def test_conv_kernel_shape_unlike_the_weights_is_refused() -> None:
    message = load_error("Conv", [("x", _x(1, 2, 6, 6)), ("w", _x(4, 2, 3, 3))], opset=11,
                         consts=("w",), kernel_shape=[2, 2])
    assert "Conv_0" in message and "kernel_shape" in message


@st.composite
def conv_transpose_case(draw: st.DrawFn) -> dict:
    spatial = draw(st.sampled_from([1, 2, 2]))
    group = draw(st.sampled_from([1, 1, 2]))
    c_in, c_out = group * draw(st.integers(1, 2)), group * draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(spatial)]
    dilations = [draw(st.integers(1, 2)) for _ in range(spatial)]
    size = [draw(st.integers(2, 5)) for _ in range(spatial)]
    attrs: dict = {"group": group, "strides": strides, "dilations": dilations}
    how = draw(st.sampled_from(["pads", "output_padding", "output_shape", "SAME_UPPER",
                                "SAME_LOWER", "VALID", "none"]))
    if how == "pads":
        attrs["pads"] = [draw(st.integers(0, 1)) for _ in range(2 * spatial)]
    elif how == "output_padding":
        attrs["output_padding"] = [draw(st.integers(0, s - 1)) for s in strides]
        attrs["pads"] = [draw(st.integers(0, 1)) for _ in range(2 * spatial)]
    elif how == "output_shape":
        full = [(n - 1) * s + (k - 1) * d + 1
                for n, s, k, d in zip(size, strides, kernel, dilations, strict=True)]
        attrs["output_shape"] = [f + draw(st.integers(-1, 0)) for f in full]
    elif how != "none":
        attrs["auto_pad"] = how
        if how.startswith("SAME"):  # refused with a kernel smaller than its stride
            assume(all((k - 1) * d + 1 >= s for k, s, d in zip(kernel, strides, dilations,
                                                                 strict=True)))
    full = [(n - 1) * s + (k - 1) * d + 1 + e - b - f for n, s, k, d, e, b, f in zip(
        size, strides, kernel, dilations, attrs.get("output_padding", [0] * spatial),
        attrs.get("pads", [0] * 2 * spatial)[:spatial],
        attrs.get("pads", [0] * 2 * spatial)[spatial:], strict=True)]
    assume(min(full) > 0)  # a valid model has an output
    return {"x": (draw(st.integers(1, 2)), c_in, *size),
            "w": (c_in, c_out // group, *kernel), "bias": draw(st.booleans()), "attrs": attrs}


@SETTINGS
@given(case=conv_transpose_case())
def test_conv_transpose(case: dict) -> None:
    inputs = [("x", _x(*case["x"])), ("w", _x(*case["w"]))]
    if case["bias"]:
        inputs.append(("b", _x(case["w"][1] * case["attrs"]["group"])))
    # onnx.reference adds only the first group's bias in a grouped ConvTranspose
    grouped_bias = case["bias"] and case["attrs"]["group"] > 1
    compare("ConvTranspose", inputs, opset=11, consts=("w", "b"), rtol=1e-4, atol=1e-4,
            reference="onnxruntime" if grouped_bias else "onnx", **case["attrs"])


def test_conv_transpose_same_with_a_kernel_below_its_stride_is_refused() -> None:
    # onnx.reference pads the output to input * stride, onnxruntime does not: no one answer
    message = load_error("ConvTranspose", [("x", _x(1, 1, 3)), ("w", _x(1, 1, 1))], opset=11,
                         consts=("w",), strides=[2], auto_pad="SAME_UPPER")
    assert "ConvTranspose_0" in message and "auto_pad" in message


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (0.5, 2.0), (2.0, 0.0)])
@pytest.mark.parametrize("c_shape", [None, (), (5,), (1, 5), (3, 1), (3, 5)])
def test_gemm(trans_a: int, trans_b: int, alpha: float, beta: float,
              c_shape: tuple[int, ...] | None) -> None:
    a = _x(4, 3) if trans_a else _x(3, 4)
    b = _x(5, 4) if trans_b else _x(4, 5)
    c = None if c_shape is None else _x(*c_shape)
    inputs = [("a", a), ("b", b), ("c", c)]
    if c is None:
        inputs.pop()
    compare("Gemm", inputs, opset=13, consts=("b", "c"), transA=trans_a, transB=trans_b,
            alpha=alpha, beta=beta)


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2, 2)])
@pytest.mark.parametrize("opset", [9, 15])
def test_batch_norm(shape: tuple[int, ...], opset: int) -> None:
    # onnx.reference's BatchNormalization-9 fills in the default momentum and then computes
    # training statistics; the operator is inference-only at that opset (onnxruntime)
    reference = "onnxruntime" if opset < 14 else "onnx"
    c = shape[1]
    compare("BatchNormalization", [("x", _x(*shape)), ("s", _x(c)), ("b", _x(c)), ("m", _x(c)),
                                   ("v", np.abs(_x(c)) + 0.5)], opset=opset,
            consts=("s", "b", "m", "v"), epsilon=1e-3, rtol=1e-4, atol=1e-5,
            reference=reference)


def test_batch_norm_training_mode_is_refused() -> None:
    message = load_error("BatchNormalization", [("x", _x(2, 3, 4)), ("s", _x(3)), ("b", _x(3)),
                                                ("m", _x(3)), ("v", np.abs(_x(3)))],
                         opset=15, consts=("s", "b", "m", "v"), training_mode=1)
    assert "BatchNormalization_0" in message and "training_mode" in message


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 2, 3, 2)])
def test_instance_norm(shape: tuple[int, ...]) -> None:
    compare("InstanceNormalization", [("x", _x(*shape)), ("s", _x(shape[1])),
                                      ("b", _x(shape[1]))], opset=7, consts=("s", "b"),
            epsilon=1e-4, rtol=1e-4, atol=1e-4)


@st.composite
def pad_case(draw: st.DrawFn) -> dict:
    shape = tuple(draw(st.integers(1, 5)) for _ in range(draw(st.integers(1, 4))))
    mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
    rank = len(shape)
    axes = None
    if draw(st.booleans()):
        axes = draw(st.permutations(range(rank)))[:draw(st.integers(1, rank))]
        axes = [a - rank if draw(st.booleans()) else a for a in axes]
    n = rank if axes is None else len(axes)
    dims = [shape[a] for a in (range(rank) if axes is None else axes)]
    pads = [0] * (2 * n)
    for i, d in enumerate(dims):
        limit = d - 1 if mode == "reflect" else (d if mode == "wrap" else 3)
        lo = -(d - 1) // 2 if mode == "constant" else 0
        pads[i] = draw(st.integers(lo, max(lo, limit)))
        pads[n + i] = draw(st.integers(lo, max(lo, limit)))
    return {"shape": shape, "mode": mode, "axes": axes, "pads": pads,
            "value": draw(st.sampled_from([None, 0.0, -2.5]))}


@SETTINGS
@given(case=pad_case(), as_const=st.booleans())
def test_pad_opset_18_19(case: dict, as_const: bool) -> None:
    inputs = [("x", _x(*case["shape"])), ("p", np.array(case["pads"], np.int64)),
              ("v", None if case["value"] is None or case["mode"] != "constant"
               else np.array(case["value"], np.float32)),
              ("a", None if case["axes"] is None else np.array(case["axes"], np.int64))]
    while inputs[-1][1] is None:
        inputs.pop()
    compare("Pad", inputs, opset=19, consts=("p", "v", "a") if as_const else (),
            mode=case["mode"])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 0, 1, 2, 0, 0, 2, 1], [1, 0, 0, 0, 0, 1, 0, 0],
                                  [0, 0, -1, 1, 0, 0, 1, -1]])
def test_pad_opset_11(mode: str, pads: list[int]) -> None:
    if mode != "constant" and min(pads) < 0:
        return
    inputs = [("x", _x(2, 3, 4, 5)), ("p", np.array(pads, np.int64))]
    if mode == "constant":
        inputs.append(("v", np.array(1.5, np.float32)))
    compare("Pad", inputs, opset=11, consts=("p", "v"), mode=mode)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_attributes_before_opset_11(mode: str) -> None:
    attrs: dict = {"pads": [0, 1, 2, 0, 2, 1], "mode": mode}
    if mode == "constant":
        attrs["value"] = -1.0
    compare("Pad", [("x", _x(2, 3, 4))], opset=7, **attrs)


def test_pad_int_tensor() -> None:
    x = RNG.integers(-5, 5, (3, 4)).astype(np.int64)
    compare("Pad", [("x", x), ("p", np.array([1, 2, 0, 1], np.int64)),
                    ("v", np.array(7, np.int64))], opset=13, consts=("p", "v"))

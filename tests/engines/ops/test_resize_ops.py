"""Resize and Upsample of the torch executor against onnx.reference: every mode, coordinate
transform and nearest rounding, scales or sizes, axes, cubic options, and the opset forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engines.ops.onnx_case import compare, load_error

RNG = np.random.default_rng(3)
SETTINGS = settings(max_examples=40, deadline=None)
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
        "half_pixel_symmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@st.composite
def resize_case(draw: st.DrawFn) -> dict:
    rank = draw(st.sampled_from([3, 4, 4, 5]))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(rank))
    mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
    attrs: dict = {"mode": mode, "coordinate_transformation_mode": draw(st.sampled_from(CTMS))}
    if mode == "nearest":
        attrs["nearest_mode"] = draw(st.sampled_from(NEAREST))
    if mode == "cubic":
        attrs["cubic_coeff_a"] = draw(st.sampled_from([-0.75, -0.5]))
        attrs["exclude_outside"] = draw(st.integers(0, 1))
    resized = list(range(rank)) if mode == "nearest" else list(range(2, rank))
    if mode == "linear" and draw(st.booleans()):
        resized = list(range(rank))  # linear over every axis, N and C included
    use_sizes = draw(st.booleans())
    if use_sizes:
        sizes = [draw(st.integers(1, 9)) if a in resized else d for a, d in enumerate(shape)]
        return {"shape": shape, "sizes": sizes, "scales": None, "attrs": attrs}
    scales = [draw(st.sampled_from([0.5, 0.6, 1.0, 1.5, 2.0, 2.5, 3.0])) if a in resized
              else 1.0 for a in range(rank)]
    return {"shape": shape, "sizes": None, "scales": scales, "attrs": attrs}


def _resize_inputs(case: dict, opset: int) -> list:
    scales = None if case["scales"] is None else np.array(case["scales"], np.float32)
    sizes = None if case["sizes"] is None else np.array(case["sizes"], np.int64)
    roi = np.zeros(0, np.float32) if opset < 13 else None
    if scales is None and opset < 13:
        scales = np.zeros(0, np.float32)  # opset 11: scales must be given, empty with sizes
    inputs = [("x", _x(*case["shape"])), ("roi", roi), ("scales", scales), ("sizes", sizes)]
    while inputs[-1][1] is None:
        inputs.pop()
    return inputs


@SETTINGS
@given(case=resize_case(), opset=st.sampled_from([13, 19]), as_const=st.booleans())
def test_resize(case: dict, opset: int, as_const: bool) -> None:
    if case["shape"] and any(v == 0 for v in (case["sizes"] or [])):
        return
    attrs = dict(case["attrs"])
    if opset < 19 and attrs["coordinate_transformation_mode"] == "half_pixel_symmetric":
        attrs["coordinate_transformation_mode"] = "half_pixel"
    compare("Resize", _resize_inputs(case, opset), opset=opset, rtol=1e-4, atol=1e-4,
            consts=("roi", "scales", "sizes") if as_const else (), **attrs)


@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners",
                                 "asymmetric"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 3, 3], [1, 1, 0.5, 0.5],
                                    [1, 1, 1.5, 0.6]])
def test_resize_opset_11_scales(ctm: str, mode: str, scales: list[float]) -> None:
    inputs = [("x", _x(2, 3, 5, 4)), ("roi", np.zeros(0, np.float32)),
              ("scales", np.array(scales, np.float32))]
    compare("Resize", inputs, opset=11, consts=("roi", "scales"), rtol=1e-4, atol=1e-4,
            mode=mode, coordinate_transformation_mode=ctm)


def test_resize_the_inswapper_upsample() -> None:
    # the standin generator's 2x bilinear upsample (the fast path)
    inputs = [("x", _x(1, 8, 16, 16)), ("roi", np.zeros(0, np.float32)),
              ("scales", np.array([1, 1, 2, 2], np.float32))]
    compare("Resize", inputs, opset=11, consts=("roi", "scales"), rtol=1e-5, atol=1e-5,
            mode="linear", coordinate_transformation_mode="pytorch_half_pixel")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_opset_10(mode: str) -> None:
    compare("Resize", [("x", _x(1, 2, 3, 4)), ("s", np.array([1, 1, 2, 1.5], np.float32))],
            opset=10, consts=("s",), mode=mode, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("axes", "scales"), [([2, 3], [2.0, 0.5]), ([-1], [3.0]),
                                              ([3, 1], [1.5, 2.0])])
def test_resize_axes_opset_18(axes: list[int], scales: list[float]) -> None:
    compare("Resize", [("x", _x(1, 2, 4, 5)), ("roi", None),
                       ("scales", np.array(scales, np.float32))], opset=18,
            consts=("scales",), axes=axes, mode="linear", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_nearest_and_linear_on_ints(mode: str) -> None:
    if mode == "linear":
        message = load_error("Resize", [("x", RNG.integers(0, 255, (1, 1, 4, 4)).astype(
            np.uint8)), ("roi", None), ("scales", np.array([1, 1, 2, 2], np.float32))],
            opset=13, consts=("scales",), mode=mode)
        assert "Resize_0" in message and "uint8" in message
        return
    compare("Resize", [("x", RNG.integers(0, 255, (1, 1, 4, 4)).astype(np.uint8)),
                       ("roi", None), ("scales", np.array([1, 1, 3, 2], np.float32))],
            opset=13, consts=("scales",), mode=mode)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("sizes", [[3, 7], [8, 2], [1, 1]])
def test_resize_keep_aspect_ratio_policy(policy: str, sizes: list[int]) -> None:
    compare("Resize", [("x", _x(1, 2, 4, 5)), ("roi", None), ("scales", None),
                       ("sizes", np.array(sizes, np.int64))], opset=18, consts=("sizes",),
            axes=[2, 3], mode="linear", keep_aspect_ratio_policy=policy, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("attr", "value"), [
    ("antialias", 1), ("coordinate_transformation_mode", "tf_crop_and_resize"),
    ("mode", "bilinear"), ("nearest_mode", "round"),
])
def test_resize_refusals_name_the_attribute(attr: str, value: object) -> None:
    inputs = [("x", _x(1, 2, 4, 4)), ("roi", np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32)),
              ("scales", None), ("sizes", np.array([1, 2, 3, 3], np.int64))]
    attrs = {"mode": "linear", attr: value}
    message = load_error("Resize", inputs, opset=19, consts=("roi", "sizes"), **attrs)
    assert "Resize_0" in message and attr in message and str(value) in message


@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 3, 2], [1, 2, 1, 1]])
@pytest.mark.parametrize("opset", [7, 9])
def test_upsample_nearest(opset: int, scales: list[float]) -> None:
    x = _x(1, 2, 3, 4)
    if opset == 7:
        compare("Upsample", [("x", x)], opset=7, scales=[float(s) for s in scales],
                mode="nearest")
    else:
        compare("Upsample", [("x", x), ("s", np.array(scales, np.float32))], opset=9,
                consts=("s",), mode="nearest")


@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 1.5, 2.5]])
def test_upsample_linear_and_fractional_nearest_match_onnxruntime(scales: list[float]) -> None:
    # onnx.reference implements Upsample only for nearest with integer scales
    for mode in ("linear", "nearest"):
        compare("Upsample", [("x", _x(1, 2, 3, 4)), ("s", np.array(scales, np.float32))],
                opset=9, consts=("s",), mode=mode, reference="onnxruntime", rtol=1e-5,
                atol=1e-5)

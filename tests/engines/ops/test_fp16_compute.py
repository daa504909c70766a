"""The executor in float16 (the GPU engines' precision) against onnx.reference in float32:
float inputs and weights are cast to the compute dtype, so results agree to fp16 precision."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from tests.engines.ops.onnx_case import model, run_ours

RNG = np.random.default_rng(5)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CASES = {
    "Conv": ([("x", _x(1, 4, 8, 8)), ("w", _x(6, 2, 3, 3)), ("b", _x(6))],
             {"group": 2, "pads": [1, 0, 1, 2], "strides": [2, 1]}, 11),
    "Gemm": ([("x", _x(3, 8)), ("w", _x(5, 8)), ("b", _x(5))], {"transB": 1, "alpha": 0.5}, 13),
    "Resize": ([("x", _x(1, 3, 5, 4)), ("roi", None), ("s", np.array([1, 1, 1.5, 2], np.float32))],
               {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}, 13),
    "Pad": ([("x", _x(1, 2, 4, 5)), ("p", np.array([0, 1, 2, 0, 0, 1, 1, 3]))],
            {"mode": "reflect"}, 13),
    "InstanceNormalization": ([("x", _x(2, 3, 6, 6)), ("s", _x(3)), ("b", _x(3))], {}, 13),
    "Softmax": ([("x", _x(2, 3, 4))], {"axis": 1}, 13),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_fp16_compute_agrees_to_fp16_precision(op: str) -> None:
    inputs, attrs, opset = CASES[op]
    consts = tuple(name for name, _ in inputs[1:])
    onnx_model = model(op, inputs, opset=opset, consts=consts, **attrs)
    feeds = {"x": inputs[0][1]}
    (ref,) = ReferenceEvaluator(onnx_model).run(None, feeds)
    (ours,) = run_ours(onnx_model, feeds, float_dtype=torch.float16)
    assert ours.dtype == np.float16 and ours.shape == ref.shape
    error = np.abs(ours.astype(np.float32) - ref).max() / np.abs(ref).max()
    assert error < 1e-2, f"{op}: relative error {error:.2e} in fp16"

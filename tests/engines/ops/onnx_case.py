"""Tiny single-node ONNX models run by our executor and by ``onnx.reference.ReferenceEvaluator``.

:func:`compare` builds the model, runs both and asserts the outputs agree in shape, dtype and
value; :func:`load_error` returns the error our executor raises when the model loads.

The reference evaluator is the judge. Where it cannot run a valid model (it raises: e.g. Conv
with ``auto_pad=VALID`` and strides, Pad with negative pads) onnxruntime is asked instead; a test
that knows the reference is wrong for a case (BatchNormalization-9 computes training statistics
from its default ``momentum``) passes ``reference="onnxruntime"`` and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from livecam.engines.torch_graph import OnnxGraphModule

_NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
               np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int64): TensorProto.INT64,
               np.dtype(np.int32): TensorProto.INT32, np.dtype(np.uint8): TensorProto.UINT8,
               np.dtype(np.int8): TensorProto.INT8, np.dtype(np.bool_): TensorProto.BOOL}


def model(op: str, inputs: Sequence[tuple[str, np.ndarray | None]], *, opset: int,
          n_outputs: int = 1, consts: Sequence[str] = (), **attrs: Any) -> Any:
    """One ``op`` node. ``inputs``: (name, value) in ONNX order, value None = omitted optional
    input; names in ``consts`` become initializers, the others graph inputs."""
    names = [name if value is not None else "" for name, value in inputs]
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, names, outs, name=f"{op}_0", **attrs)
    graph_inputs, inits = [], []
    for name, value in inputs:
        if value is None:
            continue
        if name in consts:
            inits.append(numpy_helper.from_array(np.asarray(value), name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(
                name, _NP_TO_ONNX[np.asarray(value).dtype], list(np.shape(value))))
    graph = helper.make_graph([node], f"{op}_case", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run_ours(onnx_model: Any, feeds: Mapping[str, np.ndarray],
             float_dtype: torch.dtype = torch.float32) -> list[np.ndarray]:
    module = OnnxGraphModule(onnx_model, float_dtype=float_dtype)
    args = [torch.from_numpy(np.array(feeds[n], copy=True)) for n in module.input_names]
    with torch.no_grad():
        outs = module(*args)
    return [o.cpu().numpy() for o in outs]


def run_reference(onnx_model: Any, feeds: Mapping[str, np.ndarray],
                  reference: str = "onnx") -> list[np.ndarray]:
    """The outputs of ``onnx.reference`` (``reference="onnx"``; onnxruntime where it raises)
    or of onnxruntime (``reference="onnxruntime"``)."""
    if reference == "onnx":
        try:
            return [np.asarray(v) for v in ReferenceEvaluator(onnx_model).run(None, feeds)]
        except Exception:  # the reference cannot run this valid model: ask onnxruntime
            pass
    import onnxruntime

    session = onnxruntime.InferenceSession(onnx_model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, dict(feeds))]


def compare(op: str, inputs: Sequence[tuple[str, np.ndarray | None]], *, opset: int,
            n_outputs: int = 1, consts: Sequence[str] = (), rtol: float = 1e-5,
            atol: float = 1e-5, reference: str = "onnx", **attrs: Any) -> list[np.ndarray]:
    """Run ``op`` both ways and assert they agree; returns the reference outputs."""
    onnx_model = model(op, inputs, opset=opset, n_outputs=n_outputs, consts=consts, **attrs)
    feeds = {name: np.asarray(value) for name, value in inputs
             if value is not None and name not in consts}
    ref = run_reference(onnx_model, feeds, reference)
    ours = run_ours(onnx_model, feeds)
    assert len(ours) == len(ref)
    for i, (got, want) in enumerate(zip(ours, ref, strict=True)):
        want = np.asarray(want)
        where = f"{op} opset {opset} {attrs} output {i}"
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)
    return ref


def load_error(op: str, inputs: Sequence[tuple[str, np.ndarray | None]], *, opset: int,
               n_outputs: int = 1, consts: Sequence[str] = (), **attrs: Any) -> str:
    """The message of the error our executor raises while loading this model (none: fails)."""
    onnx_model = model(op, inputs, opset=opset, n_outputs=n_outputs, consts=consts, **attrs)
    try:
        OnnxGraphModule(onnx_model)
    except NotImplementedError as exc:
        return str(exc)
    raise AssertionError(f"{op} {attrs} at opset {opset} loaded; it should be refused")

"""Elementwise and shape ONNX operators as torch functions, for :mod:`.torch_graph`.

Registered through :mod:`.torch_opset` (which checks every node at load); the convolution and
normalisation ops are in :mod:`.torch_ops_nn`, Resize/Upsample in :mod:`.torch_resize`.
Inputs listed as ``host`` are shape-like values (axes, target shapes, exponents); the executor
hands those over as CPU tensors, so reading them never synchronises with the GPU and never
breaks CUDA-graph capture. Every op here matches ``onnx.reference`` (tests/engines/ops).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from livecam.engines.torch_opset import (
    HOST_INPUTS,
    MIN_OPSET,
    OPS,
    NodeInfo,
    OpContext,
    Tensor,
    UnsupportedNodeError,
    add,
    ints,
    op,
    runtime_error,
)

__all__ = ["HOST_INPUTS", "MIN_OPSET", "OPS", "OpContext", "Tensor", "UnsupportedNodeError",
           "onnx_dtype"]

# ONNX TensorProto data type -> torch dtype; floats are mapped to the compute dtype at run time
_ONNX_DTYPES: dict[int, torch.dtype] = {
    1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32,
    7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16,
}


def onnx_dtype(code: int, ctx: OpContext) -> torch.dtype:
    dtype = _ONNX_DTYPES[code]
    return ctx.float_dtype if dtype.is_floating_point else dtype


def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Any:
    return lambda a, _attrs, _ctx: [fn(a[0], a[1])]


_BINARY: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "MatMul": torch.matmul,
    "Equal": torch.eq, "Less": torch.lt, "Greater": torch.gt}
for _name, _binary_fn in _BINARY.items():
    add(_name, _binary(_binary_fn))


@op("Div")
def _div(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    if a[0].dtype.is_floating_point:
        return [a[0] / a[1]]
    return [torch.div(a[0], a[1], rounding_mode="trunc")]  # ONNX (numpy astype) truncates


# the exponent is read on the host: a scalar's .item() then never syncs inside a capture
@op("Pow", host=(1,))
def _pow(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, exponent = a
    if exponent.numel() == 1 and exponent.dim() <= x.dim():
        value = exponent.reshape(()).item()
        y = x * x if value == 2 else x ** value  # x*x is exact and faster than pow
    else:
        y = x ** exponent.to(x.device)
    # the result has the base's type (numpy power(...).astype(base.dtype))
    return [y if y.dtype == x.dtype else y.to(x.dtype)]


def _unary(fn: Callable[[Tensor], Tensor]) -> Any:
    return lambda a, _attrs, _ctx: [fn(a[0])]


for _name, _fn in {
    "Relu": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "Sqrt": torch.sqrt,
    "Exp": torch.exp, "Neg": torch.neg, "Abs": torch.abs, "Erf": torch.erf, "Floor": torch.floor,
    "Ceil": torch.ceil, "Reciprocal": torch.reciprocal, "Log": torch.log, "Not": torch.logical_not,
    "Identity": lambda t: t,
}.items():
    add(_name, _unary(_fn))


def _check_dropout(info: NodeInfo) -> None:
    if info.n_outputs > 1:
        info.refuse("outputs", info.n_outputs, "the mask output is not computed")
    if info.has(2):
        mode = info.const(2)
        if mode is None or bool(mode.reshape(-1)[0]):
            info.refuse("training_mode", "unknown at load" if mode is None else True,
                        "only inference (training_mode false) is implemented")


@op("Dropout", attrs=("ratio", "seed"), check=_check_dropout)
def _dropout(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [a[0]]


@op("LeakyRelu", attrs=("alpha",))
def _leaky_relu(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [torch.nn.functional.leaky_relu(a[0], float(attrs.get("alpha", 0.01)))]


@op("PRelu")
def _prelu(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, slope = a
    return [torch.where(x >= 0, x, x * slope)]


def _bound(value: Any, x: Tensor) -> float | int | None:
    if value is None:
        return None
    number = value.item() if isinstance(value, Tensor) else value
    return float(number) if x.dtype.is_floating_point else int(number)


@op("Clip", attrs=("min", "max"), host=(1, 2))
def _clip(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x = a[0]
    lo = a[1] if len(a) > 1 and a[1] is not None else attrs.get("min")
    hi = a[2] if len(a) > 2 and a[2] is not None else attrs.get("max")
    lo, hi = _bound(lo, x), _bound(hi, x)
    if lo is None and hi is None:
        return [x]
    return [torch.clamp(x, lo, hi)]


def _check_cast(info: NodeInfo) -> None:
    to = int(info.attrs["to"])
    if to not in _ONNX_DTYPES:
        info.refuse("to", to, "that ONNX data type is not implemented")


# every float type casts to the compute dtype (the executor computes floats in one dtype)
@op("Cast", attrs=("to", "saturate"), check=_check_cast)
def _cast(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    return [a[0].to(onnx_dtype(int(attrs["to"]), ctx))]


def _axes(a: list[Any], attrs: dict[str, Any]) -> list[int] | None:
    if len(a) > 1 and a[1] is not None:
        return ints(a[1])
    return [int(v) for v in attrs["axes"]] if "axes" in attrs else None


def _check_reduce(info: NodeInfo) -> None:
    dtype = info.dtype(0)
    if info.op == "ReduceMean" and dtype is not None and dtype.kind != "f":
        info.refuse("input type", str(dtype), "ReduceMean is implemented for floats")


def _reduce(fn: Callable[..., Tensor]) -> Any:
    def run(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
        x = a[0]
        axes = _axes(a, attrs)
        keep = bool(attrs.get("keepdims", 1))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.dim()))
        y = fn(x, dim=axes, keepdim=keep)
        return [y if y.dtype == x.dtype else y.to(x.dtype)]  # torch sums int32 as int64

    return run


_REDUCE: dict[str, Callable[..., Tensor]] = {
    "ReduceMean": torch.mean, "ReduceSum": torch.sum, "ReduceMax": torch.amax}
for _name, _reduce_fn in _REDUCE.items():
    add(_name, _reduce(_reduce_fn), attrs=("axes", "keepdims", "noop_with_empty_axes"),
        host=(1,), check=_check_reduce)


@op("Reshape", attrs=("allowzero",), host=(1,))
def _reshape(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, shape = a[0], ints(a[1])
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


@op("Flatten", attrs=("axis",))
def _flatten(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, axis = a[0], int(attrs.get("axis", 1))
    if axis < 0:  # axis may equal the rank: (prod(all), 1)
        axis += x.dim()
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@op("Transpose", attrs=("perm",))
def _transpose(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    perm = attrs.get("perm") or list(reversed(range(a[0].dim())))
    return [a[0].permute(*perm)]


@op("Unsqueeze", attrs=("axes",), host=(1,))
def _unsqueeze(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, axes = a[0], _axes(a, attrs) or []
    rank = x.dim() + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        x = x.unsqueeze(ax)
    return [x]


@op("Squeeze", attrs=("axes",), host=(1,))
def _squeeze(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, axes = a[0], _axes(a, attrs)
    if axes is None:
        return [x.squeeze()]
    for ax in sorted((ax % x.dim() for ax in axes), reverse=True):
        x = x.squeeze(ax)
    return [x]


@op("Concat", attrs=("axis",))
def _concat(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    parts = [t for t in a if t is not None and t.numel() > 0] or [a[0]]
    return [torch.cat(parts, dim=int(attrs["axis"]))]


@op("Shape", attrs=("start", "end"))
def _shape(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    dims = list(a[0].shape)[attrs.get("start", 0):attrs.get("end")]
    return [torch.tensor(dims, dtype=torch.int64)]


@op("Size")
def _size(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [torch.tensor(a[0].numel(), dtype=torch.int64)]


@op("Gather", attrs=("axis",))
def _gather(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, idx = a
    axis = int(attrs.get("axis", 0)) % x.dim()
    idx = torch.where(idx < 0, idx + x.shape[axis], idx)
    flat = x.index_select(axis, idx.reshape(-1).to(x.device))
    return [flat.reshape((*x.shape[:axis], *idx.shape, *x.shape[axis + 1:]))]


@op("Slice", attrs=("starts", "ends", "axes"), host=(1, 2, 3, 4))
def _slice(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x = a[0]
    if len(a) > 1:
        starts, ends = ints(a[1]), ints(a[2])
        axes = ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
        steps = ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    else:  # opset < 10: attributes
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis %= x.dim()
        if step > 0:
            index: list[Any] = [slice(None)] * x.dim()
            index[axis] = slice(start, end, step)
            x = x[tuple(index)]
            continue
        # torch has no negative steps: the same elements, counted from the flipped end
        size = x.shape[axis]
        picked = range(size)[slice(start, end, step)]
        flipped = x.flip(axis)
        first = size - 1 - picked[0] if len(picked) else 0
        index = [slice(None)] * x.dim()
        index[axis] = slice(first, first + len(picked) * -step, -step)
        x = flipped[tuple(index)]
    return [x]


@op("ConstantOfShape", attrs=("value",), host=(0,))
def _constant_of_shape(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    from onnx import numpy_helper

    value = attrs.get("value")
    fill = torch.from_numpy(numpy_helper.to_array(value).copy()) if value is not None \
        else torch.zeros(1)
    # shape-path results stay on the host; the executor moves float results to the device
    return [torch.full(ints(a[0]), fill.reshape(-1)[0].item(), dtype=fill.dtype)]


@op("Expand", host=(1,))
def _expand(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    target = torch.broadcast_shapes(tuple(a[0].shape), tuple(ints(a[1])))
    return [a[0].expand(target)]


@op("Tile", host=(1,))
def _tile(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [a[0].repeat(*ints(a[1]))]


@op("Where")
def _where(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [torch.where(a[0], a[1], a[2])]


@op("Split", attrs=("axis", "split", "num_outputs"), host=(1,))
def _split(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    axis = int(attrs.get("axis", 0))
    sizes = ints(a[1]) if len(a) > 1 and a[1] is not None else list(attrs.get("split", []))
    if not sizes:
        n_out = int(attrs.get("num_outputs", attrs["_n_outputs"]))
        dim = a[0].shape[axis]
        chunk = -(-dim // n_out)  # opset 18: the last chunk is smaller when uneven
        sizes = [chunk] * (n_out - 1) + [dim - chunk * (n_out - 1)]
        if sizes[-1] < 0:
            raise runtime_error(attrs, f"splitting {dim} into {n_out} chunks")
    return list(torch.split(a[0], sizes, dim=axis))


def _register_the_rest() -> None:
    # the other op families register themselves on import
    from livecam.engines import torch_ops_nn, torch_resize  # noqa: F401


_register_the_rest()

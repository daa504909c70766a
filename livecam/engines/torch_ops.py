"""ONNX operators as torch functions, for :mod:`livecam.engines.torch_graph`.

Each op is ``fn(args, attrs, ctx) -> list[Tensor]``. ``args`` holds one tensor per ONNX input
(None for an omitted optional input). Inputs listed in :data:`HOST_INPUTS` are shape-like values
(pads, axes, scales, target shapes); the executor always hands those over as CPU tensors, so
reading them never synchronises with the GPU and never breaks CUDA-graph capture.

Only the ops that the inswapper / ArcFace / GFPGAN-family graphs use are here; an unknown op is
reported by name when the graph is loaded, not in the middle of a frame.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


@dataclass(frozen=True)
class OpContext:
    """What ops need besides their inputs: the float dtype and device values are computed in."""

    float_dtype: torch.dtype
    device: torch.device


OpFn = Callable[[list[Any], dict[str, Any], OpContext], list[Tensor]]

# ONNX TensorProto data type -> torch dtype; floats are mapped to the compute dtype at run time
_ONNX_DTYPES: dict[int, torch.dtype] = {
    1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32,
    7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16,
}

# positions of inputs read as host values (see the module docstring)
HOST_INPUTS: dict[str, frozenset[int]] = {
    "Reshape": frozenset({1}), "Resize": frozenset({1, 2, 3}), "Upsample": frozenset({1}),
    "Pad": frozenset({1, 2}), "Slice": frozenset({1, 2, 3, 4}), "Unsqueeze": frozenset({1}),
    "Squeeze": frozenset({1}), "ReduceMean": frozenset({1}), "ReduceSum": frozenset({1}),
    "ReduceMax": frozenset({1}), "Expand": frozenset({1}), "ConstantOfShape": frozenset({0}),
    "Tile": frozenset({1}), "Clip": frozenset({1, 2}), "Split": frozenset({1}),
    # a scalar exponent read on the host keeps .item() from syncing inside a CUDA graph capture
    "Pow": frozenset({1}),
}

OPS: dict[str, OpFn] = {}


def _op(*names: str) -> Callable[[OpFn], OpFn]:
    def register(fn: OpFn) -> OpFn:
        for name in names:
            OPS[name] = fn
        return fn

    return register


def _ints(t: Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def onnx_dtype(code: int, ctx: OpContext) -> torch.dtype:
    dtype = _ONNX_DTYPES.get(code)
    if dtype is None:
        raise NotImplementedError(f"ONNX data type {code} is not supported")
    return ctx.float_dtype if dtype.is_floating_point else dtype


def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> OpFn:
    return lambda a, _attrs, _ctx: [fn(a[0], a[1])]


OPS["Add"] = _binary(torch.add)
OPS["Sub"] = _binary(torch.sub)
OPS["Mul"] = _binary(torch.mul)
OPS["MatMul"] = _binary(torch.matmul)
OPS["Equal"] = _binary(torch.eq)
OPS["Less"] = _binary(torch.lt)
OPS["Greater"] = _binary(torch.gt)


@_op("Div")
def _div(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    if a[0].dtype.is_floating_point:
        return [a[0] / a[1]]
    return [torch.div(a[0], a[1], rounding_mode="trunc")]


@_op("Pow")
def _pow(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    exponent = a[1]
    if exponent.numel() == 1:
        value = float(exponent.reshape(()).item())
        if value == 2.0:  # x*x is exact and faster than pow
            return [a[0] * a[0]]
        return [a[0] ** value]
    return [a[0] ** exponent.to(a[0].device, a[0].dtype)]


def _unary(fn: Callable[[Tensor], Tensor]) -> OpFn:
    return lambda a, _attrs, _ctx: [fn(a[0])]


for _name, _fn in {
    "Relu": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "Sqrt": torch.sqrt,
    "Exp": torch.exp, "Neg": torch.neg, "Abs": torch.abs, "Erf": torch.erf, "Floor": torch.floor,
    "Ceil": torch.ceil, "Reciprocal": torch.reciprocal, "Log": torch.log, "Not": torch.logical_not,
    "Identity": lambda t: t, "Dropout": lambda t: t,
}.items():
    OPS[_name] = _unary(_fn)


@_op("LeakyRelu")
def _leaky_relu(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [F.leaky_relu(a[0], float(attrs.get("alpha", 0.01)))]


@_op("PRelu")
def _prelu(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, slope = a
    return [torch.where(x >= 0, x, x * slope)]


@_op("Clip")
def _clip(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    lo = a[1] if len(a) > 1 and a[1] is not None else attrs.get("min")
    hi = a[2] if len(a) > 2 and a[2] is not None else attrs.get("max")
    lo_f = None if lo is None else float(lo.item() if isinstance(lo, Tensor) else lo)
    hi_f = None if hi is None else float(hi.item() if isinstance(hi, Tensor) else hi)
    return [torch.clamp(a[0], lo_f, hi_f)]


@_op("Softmax")
def _softmax(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [torch.softmax(a[0], dim=int(attrs.get("axis", -1)))]


@_op("Conv")
def _conv(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, w = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("Conv auto_pad is not supported; re-export with explicit pads")
    spatial = w.dim() - 2
    pads = list(attrs.get("pads", [0] * 2 * spatial))
    begin, end = pads[:spatial], pads[spatial:]
    padding: Any = begin
    if begin != end:  # asymmetric: pad explicitly, last dim first as F.pad wants
        x = F.pad(x, [p for i in reversed(range(spatial)) for p in (begin[i], end[i])])
        padding = 0
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    return [conv(x, w, bias, stride=attrs.get("strides", 1), padding=padding,
                 dilation=attrs.get("dilations", 1), groups=int(attrs.get("group", 1)))]


@_op("Gemm")
def _gemm(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, w = a[0], a[1]
    if attrs.get("transA", 0):
        x = x.t()
    if attrs.get("transB", 0):
        w = w.t()
    y = torch.matmul(x, w)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if len(a) > 2 and a[2] is not None:
        y = y + (a[2] if beta == 1.0 else a[2] * beta)
    return [y]


@_op("BatchNormalization")
def _batch_norm(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, scale, bias, mean, var = a[:5]
    return [F.batch_norm(x, mean, var, scale, bias, False, 0.0, float(attrs.get("epsilon", 1e-5)))]


@_op("InstanceNormalization")
def _instance_norm(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [F.instance_norm(a[0], weight=a[1], bias=a[2], eps=float(attrs.get("epsilon", 1e-5)))]


def _axes(a: list[Any], attrs: dict[str, Any]) -> list[int] | None:
    if len(a) > 1 and a[1] is not None:
        return _ints(a[1])
    return list(attrs["axes"]) if "axes" in attrs else None


def _reduce(fn: Callable[..., Tensor]) -> OpFn:
    def run(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
        axes = _axes(a, attrs)
        keep = bool(attrs.get("keepdims", 1))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [a[0]]
            axes = list(range(a[0].dim()))
        return [fn(a[0], dim=axes, keepdim=keep)]

    return run


OPS["ReduceMean"] = _reduce(torch.mean)
OPS["ReduceSum"] = _reduce(torch.sum)
OPS["ReduceMax"] = _reduce(torch.amax)


@_op("Reshape")
def _reshape(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, shape = a[0], _ints(a[1])
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


@_op("Flatten")
def _flatten(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, axis = a[0], int(attrs.get("axis", 1))
    axis = axis % x.dim() if x.dim() else 0
    lead = 1
    for d in x.shape[:axis]:
        lead *= d
    return [x.reshape(lead, -1)]


@_op("Transpose")
def _transpose(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    perm = attrs.get("perm") or list(reversed(range(a[0].dim())))
    return [a[0].permute(*perm)]


@_op("Unsqueeze")
def _unsqueeze(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, axes = a[0], _axes(a, attrs) or []
    rank = x.dim() + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        x = x.unsqueeze(ax)
    return [x]


@_op("Squeeze")
def _squeeze(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, axes = a[0], _axes(a, attrs)
    if axes is None:
        return [x.squeeze()]
    for ax in sorted((ax % x.dim() for ax in axes), reverse=True):
        x = x.squeeze(ax)
    return [x]


@_op("Concat")
def _concat(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    parts = [t for t in a if t is not None and t.numel() > 0] or [a[0]]
    return [torch.cat(parts, dim=int(attrs["axis"]))]


@_op("Shape")
def _shape(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    dims = list(a[0].shape)[attrs.get("start", 0):attrs.get("end")]
    return [torch.tensor(dims, dtype=torch.int64)]


@_op("Gather")
def _gather(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, idx = a
    axis = int(attrs.get("axis", 0)) % x.dim()
    idx = torch.where(idx < 0, idx + x.shape[axis], idx)
    flat = x.index_select(axis, idx.reshape(-1).to(x.device))
    return [flat.reshape((*x.shape[:axis], *idx.shape, *x.shape[axis + 1:]))]


@_op("Slice")
def _slice(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x = a[0]
    if len(a) > 1:
        starts, ends = _ints(a[1]), _ints(a[2])
        axes = _ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
        steps = _ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
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
        else:  # torch has no negative-step slicing: index explicitly (the ONNX pads idiom)
            picked = range(x.shape[axis])[slice(start, end, step)]
            x = x.index_select(axis, torch.tensor(list(picked), dtype=torch.int64,
                                                  device=x.device))
    return [x]


@_op("Pad")
def _pad(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x = a[0]
    pads = _ints(a[1]) if len(a) > 1 and a[1] is not None else list(attrs["pads"])
    value = float(a[2].item()) if len(a) > 2 and a[2] is not None else attrs.get("value", 0.0)
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    rank = x.dim()
    begin, end = pads[:rank], pads[rank:]
    torch_pads = [p for i in reversed(range(rank)) for p in (begin[i], end[i])]
    # torch pads from the last dim backwards; trailing zero pairs for N, C are dropped
    while len(torch_pads) > 2 and torch_pads[-1] == 0 and torch_pads[-2] == 0:
        torch_pads = torch_pads[:-2]
    torch_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}[mode]
    if torch_mode == "constant":
        return [F.pad(x, torch_pads, mode="constant", value=value)]
    return [F.pad(x, torch_pads, mode=torch_mode)]


@_op("Resize", "Upsample")
def _resize(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x = a[0]
    scales: list[float] | None
    if len(a) == 2:  # Upsample(X, scales)
        scales, sizes = [float(v) for v in a[1].tolist()], None
    else:
        scales_t = a[2] if len(a) > 2 else None
        sizes_t = a[3] if len(a) > 3 else None
        scales = [float(v) for v in scales_t.tolist()] if scales_t is not None and \
            scales_t.numel() else None
        sizes = _ints(sizes_t) if sizes_t is not None and sizes_t.numel() else None
    if sizes is None:
        assert scales is not None
        if scales[:2] != [1.0, 1.0]:
            raise NotImplementedError("Resize over batch or channels is not supported")
        out_size = [int(d * s) for d, s in zip(x.shape[2:], scales[2:], strict=True)]
    else:
        out_size = sizes[2:]
    mode = attrs.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = attrs.get("coordinate_transformation_mode", b"half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    if mode == "nearest":
        if ctm not in ("asymmetric",) and len(a) != 2:
            raise NotImplementedError(f"Resize nearest with {ctm} coordinates is not supported")
        return [F.interpolate(x, size=out_size, mode="nearest")]
    torch_mode = {"linear": "bilinear" if x.dim() == 4 else "linear", "cubic": "bicubic"}[mode]
    if ctm in ("half_pixel", "pytorch_half_pixel"):
        return [F.interpolate(x, size=out_size, mode=torch_mode, align_corners=False)]
    if ctm == "align_corners":
        return [F.interpolate(x, size=out_size, mode=torch_mode, align_corners=True)]
    raise NotImplementedError(f"Resize {mode} with {ctm} coordinates is not supported")


@_op("Cast")
def _cast(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    return [a[0].to(onnx_dtype(int(attrs["to"]), ctx))]


@_op("ConstantOfShape")
def _constant_of_shape(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    from onnx import numpy_helper

    value = attrs.get("value")
    fill = torch.from_numpy(numpy_helper.to_array(value).copy()) if value is not None \
        else torch.zeros(1)
    # shape-path results stay on the host; the executor moves float results to the device
    return [torch.full(_ints(a[0]), fill.reshape(-1)[0].item(), dtype=fill.dtype)]


@_op("Expand")
def _expand(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    shape = _ints(a[1])
    target = torch.broadcast_shapes(tuple(a[0].shape), tuple(shape))
    return [a[0].expand(target)]


@_op("Tile")
def _tile(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [a[0].repeat(*_ints(a[1]))]


@_op("Where")
def _where(a: list[Any], _attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [torch.where(a[0], a[1], a[2])]


@_op("Split")
def _split(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    axis = int(attrs.get("axis", 0))
    sizes = _ints(a[1]) if len(a) > 1 and a[1] is not None else list(attrs.get("split", []))
    n_out = int(attrs["_n_outputs"])
    if not sizes:
        sizes = [a[0].shape[axis] // n_out] * n_out
    return list(torch.split(a[0], sizes, dim=axis))

"""Convolutions, Gemm, normalisations, Softmax and Pad as torch functions (see
:mod:`.torch_opset` for the registry and the load-time checks). Every attribute combination
accepted here matches ``onnx.reference`` (or onnxruntime where the reference cannot run a
valid model); tests/engines/ops/test_nn_ops.py walks the attribute space.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from livecam.engines.torch_opset import (
    NodeInfo,
    OpContext,
    Tensor,
    choice,
    ints,
    op,
    runtime_error,
    text,
)

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_TRANSPOSES = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _check_conv(info: NodeInfo) -> None:
    auto_pad = choice(info, "auto_pad", "NOTSET", _AUTO_PADS)
    if info.op == "Conv" and auto_pad.startswith("SAME") and any(
            d != 1 for d in info.attrs.get("dilations", ())):
        # onnxruntime refuses this too and onnx.reference cannot run it: nothing to match
        info.refuse("dilations", list(info.attrs["dilations"]), f"with auto_pad {auto_pad}")
    weight = info.const(1)
    kernel = info.attrs.get("kernel_shape")
    if weight is not None:
        if weight.dim() - 2 not in _CONVS:
            info.refuse("weight rank", weight.dim(), "1-3 spatial dimensions are implemented")
        if kernel is not None and list(kernel) != list(weight.shape[2:]):
            info.refuse("kernel_shape", list(kernel), f"the weights are {list(weight.shape)}")
    if any(p < 0 for p in info.attrs.get("pads", ())):
        info.refuse("pads", list(info.attrs["pads"]), "negative pads")
    if info.op == "ConvTranspose":
        shape = info.attrs.get("output_shape")
        if shape is not None and weight is not None and len(shape) != weight.dim() - 2:
            info.refuse("output_shape", list(shape), "give the spatial sizes only")
        if auto_pad.startswith("SAME") and shape is None:
            if weight is None:
                info.refuse("auto_pad", auto_pad, "with weights unknown at load")
            spatial = weight.dim() - 2
            for k, s, d in zip(weight.shape[2:], info.attrs.get("strides", [1] * spatial),
                               info.attrs.get("dilations", [1] * spatial), strict=True):
                if (k - 1) * d + 1 < s:  # onnxruntime and onnx.reference disagree here
                    info.refuse("auto_pad", auto_pad, f"with a kernel extent below stride {s}")


def _same_pads(auto_pad: str, total: list[int]) -> tuple[list[int], list[int]]:
    """Split total padding per axis: the odd pixel at the end (SAME_UPPER) or start. A
    negative total (a transposed conv's output_shape beyond its full size) is split with
    floor division, as onnx.reference does (and onnxruntime for output_shape)."""
    small = [t // 2 for t in total]
    big = [t - t // 2 for t in total]
    return (small, big) if auto_pad == "SAME_UPPER" else (big, small)


def _conv_geometry(x: Tensor, w: Tensor, attrs: dict[str, Any]) -> tuple[int, list[int],
                                                                         list[int]]:
    spatial = w.dim() - 2
    return (spatial, [int(s) for s in attrs.get("strides", [1] * spatial)],
            [int(d) for d in attrs.get("dilations", [1] * spatial)])


@op("Conv", attrs=_CONV_ATTRS, check=_check_conv)
def _conv(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, w = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    spatial, strides, dilations = _conv_geometry(x, w, attrs)
    auto_pad = text(attrs.get("auto_pad", "NOTSET"))
    if auto_pad == "NOTSET":
        pads = [int(p) for p in attrs.get("pads", [0] * 2 * spatial)]
        begin, end = pads[:spatial], pads[spatial:]
    elif auto_pad == "VALID":
        begin = end = [0] * spatial
    else:  # output = ceil(input / stride)
        total = []
        for size, k, s, d in zip(x.shape[2:], w.shape[2:], strides, dilations, strict=True):
            out = -(-size // s)
            total.append(max((out - 1) * s + (k - 1) * d + 1 - size, 0))
        begin, end = _same_pads(auto_pad, total)
    padding: Any = begin
    if begin != end:  # asymmetric: pad explicitly, last dim first as F.pad wants
        x = F.pad(x, [p for i in reversed(range(spatial)) for p in (begin[i], end[i])])
        padding = 0
    return [_CONVS[spatial](x, w, bias, stride=strides, padding=padding, dilation=dilations,
                            groups=int(attrs.get("group", 1)))]


@op("ConvTranspose", attrs=(*_CONV_ATTRS, "output_padding", "output_shape"), check=_check_conv)
def _conv_transpose(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, w = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    spatial, strides, dilations = _conv_geometry(x, w, attrs)
    groups = int(attrs.get("group", 1))
    extra = [int(p) for p in attrs.get("output_padding", [0] * spatial)]
    full = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in
            zip(x.shape[2:], strides, w.shape[2:], dilations, strict=True)]
    auto_pad = text(attrs.get("auto_pad", "NOTSET"))
    if "output_shape" in attrs or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [int(v) for v in attrs["output_shape"]] if "output_shape" in attrs else \
            [n * s for n, s in zip(x.shape[2:], strides, strict=True)]
        total = [f + e - o for f, e, o in zip(full, extra, wanted, strict=True)]
        begin, end = _same_pads("SAME_UPPER" if auto_pad == "SAME_UPPER" else "SAME_LOWER",
                                total)
    elif auto_pad == "VALID":
        begin = end = [0] * spatial
    else:
        pads = [int(p) for p in attrs.get("pads", [0] * 2 * spatial)]
        begin, end = pads[:spatial], pads[spatial:]
    conv = _CONV_TRANSPOSES[spatial]
    if begin == end and min(begin) >= 0 and all(
            0 <= e < max(s, d) for e, s, d in zip(extra, strides, dilations, strict=True)):
        return [conv(x, w, bias, stride=strides, padding=begin, output_padding=extra,
                     groups=groups, dilation=dilations)]
    # general case: the full result, then crop (or zero-extend) each side
    y = conv(x, w, None, stride=strides, groups=groups, dilation=dilations)
    y = F.pad(y, [p for i in reversed(range(spatial)) for p in (-begin[i], extra[i] - end[i])])
    if bias is not None:
        y = y + bias.reshape(1, -1, *[1] * spatial)
    return [y]


@op("Gemm", attrs=("alpha", "beta", "transA", "transB"))
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


def _check_batch_norm(info: NodeInfo) -> None:
    if info.attrs.get("training_mode", 0):
        info.refuse("training_mode", info.attrs["training_mode"], "inference only")
    if not info.attrs.get("spatial", 1):
        info.refuse("spatial", info.attrs["spatial"], "per-activation statistics")
    if info.n_outputs > 1:
        info.refuse("outputs", info.n_outputs, "the running statistics are not computed")


@op("BatchNormalization", attrs=("epsilon", "momentum", "training_mode", "spatial"),
    check=_check_batch_norm)
def _batch_norm(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, scale, bias, mean, var = a[:5]
    return [F.batch_norm(x, mean, var, scale, bias, False, 0.0, float(attrs.get("epsilon", 1e-5)))]


@op("InstanceNormalization", attrs=("epsilon",))
def _instance_norm(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    return [F.instance_norm(a[0], weight=a[1], bias=a[2], eps=float(attrs.get("epsilon", 1e-5)))]


@op("Softmax", attrs=("axis",))
def _softmax(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x = a[0]
    if attrs["_opset"] >= 13:
        return [torch.softmax(x, dim=int(attrs.get("axis", -1)))]
    # before opset 13: the input is coerced to 2-D at axis (default 1), softmax over the rest
    axis = int(attrs.get("axis", 1)) % max(x.dim(), 1)
    flat = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    return [torch.softmax(flat, dim=1).reshape(x.shape)]


def _check_pad(info: NodeInfo) -> None:
    modes = ("constant", "reflect", "edge", "wrap") if info.opset >= 19 else \
        ("constant", "reflect", "edge")
    mode = choice(info, "mode", "constant", modes)
    pads = info.attrs.get("pads") if info.opset < 11 else info.const(1)
    if mode != "constant" and pads is not None and min(ints(torch.as_tensor(pads)),
                                                       default=0) < 0:
        info.refuse("pads", ints(torch.as_tensor(pads)), f"negative pads in {mode} mode")


def _pad_index(mode: str, size: int, begin: int, end: int) -> np.ndarray:
    """Source index of every output position of one axis (numpy.pad's modes)."""
    idx = np.arange(-begin, size + end)
    if mode == "edge":
        return np.clip(idx, 0, size - 1)
    if mode == "wrap":
        return np.mod(idx, size)
    if size == 1:  # reflect
        return np.zeros_like(idx)
    period = 2 * (size - 1)
    folded = np.mod(idx, period)
    return np.where(folded < size, folded, period - folded)


_TORCH_PAD_MODES = {"reflect": "reflect", "edge": "replicate"}


@op("Pad", attrs=("mode", "pads", "value"), host=(1, 2, 3), check=_check_pad)
def _pad(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    x = a[0]
    rank = x.dim()
    if len(a) > 1 and a[1] is not None:
        raw = ints(a[1])
        value = a[2].item() if len(a) > 2 and a[2] is not None else 0
    else:  # opset < 11: attributes
        raw, value = [int(p) for p in attrs["pads"]], attrs.get("value", 0.0)
    axes = [ax % rank for ax in ints(a[3])] if len(a) > 3 and a[3] is not None else \
        list(range(rank))
    begin, end = [0] * rank, [0] * rank
    for i, ax in enumerate(axes):
        begin[ax], end[ax] = raw[i], raw[len(axes) + i]
    mode = text(attrs.get("mode", "constant"))
    torch_pads = [p for i in reversed(range(rank)) for p in (begin[i], end[i])]
    if mode == "constant":
        fill = float(value) if x.dtype.is_floating_point else int(value)
        return [F.pad(x, torch_pads, mode="constant", value=fill)]
    if min(begin + end) < 0:
        raise runtime_error(attrs, f"negative pads in {mode} mode")
    padded = [i for i in range(rank) if begin[i] or end[i]]
    if (mode in _TORCH_PAD_MODES and 1 <= len(padded) <= 3 and 1 <= rank - len(padded) <= 2
            and padded == list(range(rank - len(padded), rank))
            and (mode != "reflect" or all(max(begin[i], end[i]) < x.shape[i] for i in padded))):
        # the native kernel: pads on the last 1-3 axes, with one or two axes before them
        return [F.pad(x, torch_pads[:2 * len(padded)], mode=_TORCH_PAD_MODES[mode])]
    for i in padded:
        x = x.index_select(i, _pad_indices(ctx, mode, x.shape[i], begin[i], end[i]))
    return [x]


def _pad_indices(ctx: OpContext, mode: str, size: int, begin: int, end: int) -> Tensor:
    return ctx.cached(("pad", mode, size, begin, end),
                      lambda: _pad_index(mode, size, begin, end), torch.int64)

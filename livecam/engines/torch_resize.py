"""ONNX Resize and Upsample as torch functions, exactly as ``onnx.reference`` computes them.

Resize is separable: each resized axis maps every output index to source taps and weights
that depend only on the shapes and attributes. Those are computed on the host in float64 with
the reference's own formulas (coordinate transform, nearest rounding, linear / cubic weights,
``exclude_outside``, edge clamping), cached on the device per shape (:meth:`OpContext.cached`),
and applied with one gather (nearest) or one gather and a weighted sum (linear, cubic) per axis.
Linear resizes of the spatial axes whose coordinates torch's own kernel computes the same way
(half_pixel; pytorch_half_pixel and align_corners where the output is not one pixel / the size
is whole) go to ``F.interpolate`` instead: one fused kernel. Upsample and Resize-10 follow
onnxruntime (asymmetric coordinates, nearest truncating up-scaled and rounding down-scaled
axes up); the reference implements Upsample only for whole nearest scales.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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

_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_INTERPOLATE = {3: "linear", 4: "bilinear", 5: "trilinear"}


@dataclass(frozen=True)
class _Params:
    mode: str  # nearest | linear | cubic
    ctm: str  # coordinate transformation mode
    nearest: str  # nearest mode; "simple" = Upsample / Resize-10
    cubic_a: float = -0.75
    exclude_outside: bool = False


def _ctms(opset: int) -> tuple[str, ...]:
    base = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
    if opset < 18:
        return (*base, "tf_half_pixel_for_nearest")
    return (*base, "half_pixel_symmetric") if opset >= 19 else base


def _check_resize(info: NodeInfo) -> None:
    if info.op == "Upsample" or info.opset < 11:
        mode = choice(info, "mode", "nearest", ("nearest", "linear"))
    else:
        mode = choice(info, "mode", "nearest", ("nearest", "linear", "cubic"))
        choice(info, "coordinate_transformation_mode", "half_pixel", _ctms(info.opset))
        choice(info, "nearest_mode", "round_prefer_floor", _NEAREST_MODES)
        choice(info, "keep_aspect_ratio_policy", "stretch", ("stretch", "not_larger",
                                                              "not_smaller"))
        if info.attrs.get("antialias", 0):
            info.refuse("antialias", info.attrs["antialias"], "not implemented")
    dtype = info.dtype(0)
    if mode != "nearest" and dtype is not None and dtype.kind != "f":
        info.refuse("input type", str(dtype), f"{mode} resize is implemented for floats")


def _coords(p: _Params, in_w: int, out_w: int, scale: float) -> np.ndarray:
    """Source coordinate of every output index along one axis (float64, the reference's)."""
    y = np.arange(out_w, dtype=np.float64)
    width = scale * in_w  # the real-valued output width
    if p.ctm == "align_corners":
        return np.zeros(out_w) if width == 1 else y * (in_w - 1) / (width - 1)
    if p.ctm == "asymmetric":
        return y / scale
    if p.ctm == "pytorch_half_pixel":
        return np.full(out_w, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if p.ctm == "half_pixel_symmetric":
        offset = in_w / 2 * (1 - out_w / width)
        return offset + (y + 0.5) / scale - 0.5
    if p.ctm == "tf_half_pixel_for_nearest":
        return (y + 0.5) / scale
    return (y + 0.5) / scale - 0.5  # half_pixel


def _weights(p: _Params, ratio: np.ndarray) -> np.ndarray:
    """(out, taps) weights for the fractional positions ``ratio`` in (0, 1]."""
    r = ratio[:, None]
    if p.mode == "linear":
        return np.concatenate([1 - r, r], axis=1)
    if p.mode == "cubic":
        a = p.cubic_a
        s, t = r + 1, 1 - r
        return np.concatenate([
            ((a * s - 5 * a) * s + 8 * a) * s - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a], axis=1)
    whole = ratio == 1.0  # an exact source pixel: the reference takes it
    pick_second = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                   "floor": np.zeros_like(whole), "ceil": np.ones_like(whole)}[p.nearest]
    second = whole | pick_second
    return np.stack([~second, second], axis=1).astype(np.float64)


def axis_taps(p: _Params, in_w: int, out_w: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Source indices (out, taps), clamped to the axis, and their weights (out, taps)."""
    x = _coords(p, in_w, out_w, scale)
    if p.nearest == "simple" and p.mode == "nearest":
        index = np.ceil(x) if scale < 1 else np.floor(x)
        return np.clip(index, 0, in_w - 1).astype(np.int64)[:, None], np.ones((out_w, 1))
    x_int = np.floor(x)
    ratio = np.where(x == x_int, 1.0, x - x_int)
    weights = _weights(p, ratio)
    n = weights.shape[1]
    # the n source pixels nearest to x, ties to the smaller index (reference: _get_neighbor)
    pad = math.ceil(n / 2)
    padded = x + pad
    base = np.floor(padded)
    offset = np.where(padded - base == 0, -(n // 2), -(n // 2) + 1)
    index = (base + offset).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if p.exclude_outside:
        weights = np.where((index < 0) | (index >= in_w), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, in_w - 1), weights


def _resize_axis(x: Tensor, axis: int, p: _Params, out_w: int, scale: float,
                 ctx: OpContext, attrs: dict[str, Any]) -> Tensor:
    in_w = x.shape[axis]
    key = ("resize", p, in_w, out_w, scale)
    if p.mode == "nearest":
        def pick() -> np.ndarray:
            index, weights = axis_taps(p, in_w, out_w, scale)
            return index[np.arange(out_w), weights.argmax(axis=1)]

        return x.index_select(axis, ctx.cached((key, "pick"), pick, torch.int64))
    if not x.dtype.is_floating_point:
        raise runtime_error(attrs, f"{p.mode} resize of {x.dtype}")
    index = ctx.cached((key, "index"), lambda: axis_taps(p, in_w, out_w, scale)[0],
                       torch.int64)
    weights = ctx.cached((key, "weights"), lambda: axis_taps(p, in_w, out_w, scale)[1],
                         x.dtype)
    n = index.shape[1]
    gathered = x.index_select(axis, index.reshape(-1))
    gathered = gathered.reshape(*x.shape[:axis], out_w, n, *x.shape[axis + 1:])
    shape = (out_w, n, *[1] * (x.dim() - axis - 1))
    return (gathered * weights.reshape(shape)).sum(axis + 1)


def _fast(x: Tensor, p: _Params, scales: list[float], out: list[int], resized: list[int],
          by_sizes: bool) -> Tensor | None:
    """``F.interpolate`` where torch computes the reference's coordinates, else None."""
    rank = x.dim()
    if p.mode != "linear" or rank not in _INTERPOLATE or min(resized, default=0) < 2:
        return None
    spatial = range(2, rank)
    if p.ctm == "pytorch_half_pixel" and min(out[i] for i in spatial) <= 1:
        return None
    if p.ctm == "align_corners":
        if not all(scales[i] * x.shape[i] == out[i] for i in spatial):
            return None
    elif p.ctm not in ("half_pixel", "pytorch_half_pixel"):
        return None
    mode, corners = _INTERPOLATE[rank], p.ctm == "align_corners"
    if by_sizes or corners:
        return F.interpolate(x, size=[out[i] for i in spatial], mode=mode, align_corners=corners)
    if any(math.floor(x.shape[i] * scales[i]) != out[i] for i in spatial):
        return None
    return F.interpolate(x, scale_factor=[scales[i] for i in spatial], mode=mode,
                         align_corners=False, recompute_scale_factor=False)


def _resize(x: Tensor, p: _Params, ctx: OpContext, attrs: dict[str, Any], *,
            scales: list[float] | None, sizes: list[int] | None,
            axes: list[int] | None = None, keep_aspect: str = "stretch") -> Tensor:
    rank = x.dim()
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    shape = list(x.shape)
    if sizes is not None:
        out = list(shape)
        for i, a in enumerate(axes):
            out[a] = sizes[i]
        full = [out[i] / shape[i] for i in range(rank)]
        if keep_aspect != "stretch":
            pick = min if keep_aspect == "not_larger" else max
            scale = pick(full[a] for a in axes)
            full = [scale if i in axes else 1.0 for i in range(rank)]
            out = [int(scale * shape[i] + 0.5) if i in axes else shape[i] for i in range(rank)]
    elif scales is not None:
        full = [1.0] * rank
        for i, a in enumerate(axes):
            full[a] = float(np.float32(scales[i]))
        out = [int(f * d) for f, d in zip(full, shape, strict=True)]
    else:
        raise runtime_error(attrs, "Resize without scales or sizes")
    resized = [a for a in sorted(axes) if not (math.isclose(full[a], 1.0) and out[a] == shape[a])]
    if min(out, default=1) == 0:
        return x.new_zeros(out)
    # with a kept aspect ratio the scale is not out/in: torch must be given the scale
    fast = _fast(x, p, full, out, resized, sizes is not None and keep_aspect == "stretch")
    if fast is not None:
        return fast
    for a in resized:
        x = _resize_axis(x, a, p, out[a], full[a], ctx, attrs)
    return x


def _floats(t: Tensor | None) -> list[float] | None:
    return None if t is None or t.numel() == 0 else [float(v) for v in t.reshape(-1).tolist()]


@op("Resize", attrs=("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                     "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy",
                     "mode", "nearest_mode"), host=(1, 2, 3), check=_check_resize)
def _resize_op(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    mode = text(attrs.get("mode", "nearest"))
    if attrs["_opset"] < 11:  # Resize(X, scales): Upsample's semantics
        p = _Params(mode, "asymmetric", "simple")
        return [_resize(a[0], p, ctx, attrs, scales=_floats(a[1]), sizes=None)]
    p = _Params(mode, text(attrs.get("coordinate_transformation_mode", "half_pixel")),
                text(attrs.get("nearest_mode", "round_prefer_floor")),
                float(attrs.get("cubic_coeff_a", -0.75)), bool(attrs.get("exclude_outside", 0)))
    sizes_t = a[3] if len(a) > 3 else None
    sizes = ints(sizes_t) if sizes_t is not None and sizes_t.numel() else None
    axes = [int(v) for v in attrs["axes"]] if "axes" in attrs else None
    return [_resize(a[0], p, ctx, attrs, scales=None if sizes else _floats(a[2]),
                    sizes=sizes, axes=axes,
                    keep_aspect=text(attrs.get("keep_aspect_ratio_policy", "stretch")))]


@op("Upsample", attrs=("mode", "scales"), host=(1,), check=_check_resize)
def _upsample(a: list[Any], attrs: dict[str, Any], ctx: OpContext) -> list[Tensor]:
    scales = _floats(a[1]) if len(a) > 1 else [float(v) for v in attrs["scales"]]
    p = _Params(text(attrs.get("mode", "nearest")), "asymmetric", "simple")
    return [_resize(a[0], p, ctx, attrs, scales=scales, sizes=None)]

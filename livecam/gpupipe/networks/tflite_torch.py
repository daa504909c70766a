"""Run a TFLite graph as a torch module (NCHW inside, TFLite layout at the outputs).

The MediaPipe face models are small conv nets built from ~10 builtin ops. Rather than
hand-writing each architecture, :class:`TfliteGraphModule` turns the parsed operator list into
torch ops once, in ``__init__``: fp16/sparse weight constants are folded (DEQUANTIZE, DENSIFY),
conv weights move from OHWI to OIHW, and TFLite's SAME padding (extra pixel at the bottom/right
when the total is odd, unlike torch's symmetric padding) becomes an explicit pad per layer.
Every shape is static, so ``forward`` is a fixed sequence of kernels: it can be captured in a
CUDA graph and run in fp16 after ``.half()``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from livecam.core.errors import ModelError
from livecam.gpupipe.networks.tflite_reader import PADDING_SAME, TfliteModel, TfliteTensor

# NHWC axis -> NCHW axis for rank-4 activations.
_NHWC_TO_NCHW_AXIS = {0: 0, 1: 2, 2: 3, 3: 1}


@dataclass(frozen=True)
class _Step:
    """One op after lowering: ``kind`` selects the torch code in ``forward``."""

    kind: str
    inputs: tuple[int, ...]
    output: int
    params: dict[str, Any]


#: Depthwise convolutions of fewer pictures than this run on PyTorch's own CUDA kernel rather
#: than cuDNN's. cuDNN 9 (torch 2.11, H100) plans each depthwise convolution anew for every
#: batch size, about 140 ms each: 2.4 s for the detector's first call at a new batch size and
#: 1.7 s for the mesh's, on every thread, which made a lone stream's start 36 s of capturing
#: graphs. PyTorch's kernel needs about 0.1 s and runs the detector's graph as fast up to 8
#: pictures (16: 3.0 against 2.3 ms); from 32 pictures cuDNN is clearly faster (128: 9.5
#: against 15.9 ms), so large batches keep it.
CUDNN_DEPTHWISE_MIN_BATCH = 32


def _conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
            p: dict[str, Any]) -> torch.Tensor:
    """A conv step's convolution (see :data:`CUDNN_DEPTHWISE_MIN_BATCH`)."""
    groups = p["groups"]
    if (x.is_cuda and groups > 1 and groups == x.shape[1] and weight.shape[1] == 1
            and x.shape[0] < CUDNN_DEPTHWISE_MIN_BATCH):
        return torch.ops.aten._conv_depthwise2d(x, weight, list(weight.shape[2:]), bias,
                                                list(p["stride"]), list(p["padding"]),
                                                list(p["dilation"]))
    return F.conv2d(x, weight, bias, p["stride"], p["padding"], p["dilation"], groups)


def _depthwise_output(x: torch.Tensor, weight: torch.Tensor, kernel_size: list[int],
                      bias: torch.Tensor | None, stride: list[int], padding: list[int],
                      dilation: list[int]) -> torch.Tensor:
    """``aten._conv_depthwise2d``'s output as a fake tensor (its shape, dtype, device; CUDA's
    kernel writes a contiguous one), for the compilers' tracing. torch has none: a fake tensor
    of a fixed shape runs the real kernel on zeros instead, but one whose batch is symbolic
    cannot ("Operator does not support running with fake tensors"), so a network compiled for
    any batch (:mod:`livecam.gpupipe.networks.dynamic_rows`) could not be saved whole."""
    out = [(size + 2 * pad - dil * (k - 1) - 1) // step + 1 for size, k, step, pad, dil
           in zip(x.shape[2:], kernel_size, stride, padding, dilation, strict=True)]
    return x.new_empty((x.shape[0], weight.shape[0], *out))


def _register_depthwise_output() -> None:
    """Give ``aten._conv_depthwise2d`` :func:`_depthwise_output` where torch has no shape
    function for it (each torch so far; a later one may; registering adds one)."""
    name = "aten::_conv_depthwise2d"
    try:
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta"):
            torch.library.register_fake(name)(_depthwise_output)
    except (AttributeError, RuntimeError) as exc:  # a torch that refuses it: traced at starts
        logging.getLogger(__name__).info("no shape function for %s (%s): the streams' "
                                         "batched face networks are traced at each start",
                                         name, exc)


_register_depthwise_output()


def _same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TF SAME padding for one axis: (before, after); the odd pixel goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _symmetric_spatial(pad: tuple[int, ...]) -> bool:
    """Whether an NCHW ``F.pad`` tuple (W before, after, H before, after, then C) pads the
    two spatial axes alike on both sides and nothing else."""
    return (len(pad) >= 4 and pad[0] == pad[1] and pad[2] == pad[3]
            and not any(pad[4:]))


def _reads(step: _Step) -> list[int]:
    """The values a step reads: its inputs, and an add's or mul's operands that are values
    (not constants)."""
    operands = (step.params.get(key) for key in ("a", "b"))
    return [*step.inputs, *(ref[1] for ref in operands
                            if isinstance(ref, tuple) and ref[0] == "act")]


def _resize_bilinear(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """TFLite's RESIZE_BILINEAR with half-pixel centres on NCHW ``x``: ``F.interpolate``, or
    :func:`_doubled` for a doubling of both sides (the full-range detector's three). PyTorch's
    CUDA kernel for NCHW runs a thread per output pixel that loops over every picture and
    channel: at the edge search's 128 pictures a call it took about 0.4 ms a call, 8 % of the
    GPU's kernel time at 16 streams."""
    if tuple(size) == (2 * x.shape[2], 2 * x.shape[3]):
        return _doubled(x)
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def _doubled(x: torch.Tensor) -> torch.Tensor:
    """NCHW ``x`` twice as high and wide, bilinear with half-pixel centres and clamped edges
    (``F.interpolate``'s values to float rounding): along each axis output 2i is 3/4 of input
    i and 1/4 of i - 1, output 2i + 1 3/4 of i and 1/4 of i + 1. Seven kernels, each over the
    data once, on every device."""
    padded = F.pad(x, (1, 1, 1, 1), mode="replicate")
    mid = padded[..., 1:-1]
    wide = torch.stack((torch.lerp(mid, padded[..., :-2], 0.25),
                        torch.lerp(mid, padded[..., 2:], 0.25)), dim=-1).flatten(-2)
    mid = wide[..., 1:-1, :]
    return torch.stack((torch.lerp(mid, wide[..., :-2, :], 0.25),
                        torch.lerp(mid, wide[..., 2:, :], 0.25)), dim=-2).flatten(-3, -2)


def _activation(x: torch.Tensor, code: int) -> torch.Tensor:
    if code == 0:
        return x
    if code == 1:
        return F.relu(x)
    if code == 3:
        return F.relu6(x)
    if code == 2:
        return x.clamp(-1.0, 1.0)
    if code == 4:
        return torch.tanh(x)
    raise ModelError(f"fused activation {code} is not supported by the torch port")


class TfliteGraphModule(nn.Module):
    """A torch module computing subgraph 0 of a parsed TFLite model.

    ``forward(image_nchw)`` takes the single graph input as (B, C, H, W) (TFLite's (1, H, W, C)
    with any batch) in the module's dtype and returns the graph outputs in TFLite layout with
    batch B (rank-4 outputs as NHWC). Constructing it converts weights (a few ms); call
    ``.to(device, dtype)`` afterwards. Not thread-safe during ``forward`` only in the usual
    torch sense: one caller per CUDA stream.
    """

    def __init__(self, model: TfliteModel) -> None:
        super().__init__()
        if len(model.inputs) != 1:
            raise ModelError(f"expected a graph with one input, got {len(model.inputs)}")
        self.input_index = model.inputs[0]
        self.output_indices = model.outputs
        self.input_shape_nhwc = model.tensors[self.input_index].shape
        self._tensors = model.tensors
        self._n_tensors = len(model.tensors)
        self._n_buffers = 0
        # Tensor index -> numpy constant (after folding DEQUANTIZE / DENSIFY).
        self._consts: dict[int, np.ndarray] = {
            t.index: t.data for t in model.tensors if t.data is not None}
        self._rank4: set[int] = set()  # activation tensors held as NCHW
        if len(self.input_shape_nhwc) == 4:
            self._rank4.add(self.input_index)
        self.steps: list[_Step] = []
        for op in model.operators:
            self._lower(op.name, op.inputs, op.outputs, op.options)
        self._fold_pads()
        # Only the lowered steps and buffers are needed from here on.
        del self._consts, self._tensors

    # ---- lowering -------------------------------------------------------------------------
    def _buffer(self, array: np.ndarray) -> str:
        name = f"const{self._n_buffers}"
        self._n_buffers += 1
        # a copy: the parsed model's arrays are read-only and shared (read_tflite)
        self.register_buffer(name, torch.from_numpy(np.array(array, np.float32)))
        return name

    def _tensor(self, index: int) -> TfliteTensor:
        return self._tensors[index]

    def _operand(self, index: int, other_rank4: bool) -> tuple[str, Any]:
        """('act', index) for a runtime value, ('buf', name) for a constant in NCHW terms."""
        if index not in self._consts:
            return ("act", index)
        const = self._consts[index].astype(np.float32)
        if other_rank4:
            if const.ndim == 4:
                const = const.transpose(0, 3, 1, 2)
            elif const.ndim >= 1:
                channels = const.shape[-1]
                if const.size != channels:
                    raise ModelError(f"cannot broadcast constant {const.shape} in NCHW")
                const = const.reshape(1, channels, 1, 1)
        return ("buf", self._buffer(const))

    def _lower(self, name: str, inputs: tuple[int, ...], outputs: tuple[int, ...],
               opts: dict[str, Any]) -> None:
        out = outputs[0]
        x = inputs[0]
        if name in ("DEQUANTIZE", "DENSIFY") and x in self._consts:
            src = self._tensor(x)
            value = self._consts[x]
            if src.scale is not None and value.dtype.kind in "iu":
                zero = src.zero_point if src.zero_point is not None else 0
                value = (value.astype(np.float32) - zero) * src.scale
            self._consts[out] = value.astype(np.float32)
            return
        if name == "DEQUANTIZE":
            self._add("identity", (x,), out, {}, rank4=x in self._rank4)
            return
        in_shape = self._tensor(x).shape
        rank4 = x in self._rank4
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            weight = self._consts[inputs[1]].astype(np.float32)
            bias = (self._consts[inputs[2]].astype(np.float32)
                    if len(inputs) > 2 and inputs[2] >= 0 else None)
            if name == "CONV_2D":
                weight_oihw = weight.transpose(0, 3, 1, 2)
                groups = 1
            else:  # [1, KH, KW, C*M] -> [C*M, 1, KH, KW]
                weight_oihw = weight.transpose(3, 0, 1, 2)
                groups = in_shape[3]
            kh, kw = weight_oihw.shape[2:]
            pad = (0, 0, 0, 0)
            if opts["padding"] == PADDING_SAME:
                top, bottom = _same_padding(in_shape[1], kh, opts["stride_h"], opts["dilation_h"])
                left, right = _same_padding(in_shape[2], kw, opts["stride_w"], opts["dilation_w"])
                pad = (left, right, top, bottom)
            self._add("conv", (x,), out, {
                "weight": self._buffer(weight_oihw),
                "bias": None if bias is None else self._buffer(bias),
                "stride": (opts["stride_h"], opts["stride_w"]),
                "dilation": (opts["dilation_h"], opts["dilation_w"]),
                "groups": groups, "act": opts["activation"], **self._split_pad(pad)}, rank4=True)
        elif name == "MAX_POOL_2D":
            pad = (0, 0, 0, 0)
            if opts["padding"] == PADDING_SAME:
                top, bottom = _same_padding(in_shape[1], opts["filter_h"], opts["stride_h"], 1)
                left, right = _same_padding(in_shape[2], opts["filter_w"], opts["stride_w"], 1)
                pad = (left, right, top, bottom)
            self._add("maxpool", (x,), out, {
                "kernel": (opts["filter_h"], opts["filter_w"]),
                "stride": (opts["stride_h"], opts["stride_w"]),
                "pad": pad if any(pad) else None, "act": opts["activation"]}, rank4=True)
        elif name == "PAD":
            pads = self._consts[inputs[1]].astype(np.int64)
            if rank4:  # NHWC pairs -> torch order: W, H, C (last dim first)
                torch_pad = [pads[2, 0], pads[2, 1], pads[1, 0], pads[1, 1], pads[3, 0], pads[3, 1]]
            else:
                torch_pad = [int(v) for pair in pads[::-1] for v in pair]
            if rank4 and (pads[0] != 0).any():
                raise ModelError("PAD on the batch axis is not supported by the torch port")
            self._add("pad", (x,), out, {"pad": tuple(int(v) for v in torch_pad)}, rank4=rank4)
        elif name in ("ADD", "MUL"):
            a_rank4 = inputs[0] in self._rank4 or inputs[1] in self._rank4
            self._add(name.lower(), (), out, {
                "a": self._operand(inputs[0], a_rank4), "b": self._operand(inputs[1], a_rank4),
                "act": opts["activation"]}, rank4=a_rank4)
        elif name == "RELU":
            self._add("relu", (x,), out, {}, rank4=rank4)
        elif name == "PRELU":
            alpha = self._consts[inputs[1]].astype(np.float32)
            # a slope per channel of an NCHW value: torch's prelu kernel, one kernel where
            # the plain expression is three, one of them broadcast (PyTorch's slowest kind)
            per_channel = rank4 and alpha.size == in_shape[3]
            alpha = (alpha.reshape(-1) if per_channel
                     else alpha.reshape(1, -1, 1, 1) if rank4 else alpha)
            self._add("prelu", (x,), out, {"alpha": self._buffer(alpha),
                                           "per_channel": per_channel}, rank4=rank4)
        elif name == "RESHAPE":
            new_shape = list(self._tensor(out).shape)
            to4 = len(new_shape) == 4
            self._add("reshape", (x,), out,
                      {"shape": tuple(new_shape[1:]), "from4": rank4, "to4": to4}, rank4=to4)
        elif name == "CONCATENATION":
            axis = opts["axis"] % len(in_shape)
            if rank4:
                axis = _NHWC_TO_NCHW_AXIS[axis]
            self._add("concat", tuple(inputs), out, {"axis": axis, "act": opts["activation"]},
                      rank4=rank4)
        elif name == "RESIZE_BILINEAR":
            size = tuple(int(v) for v in self._consts[inputs[1]])
            if opts["align_corners"] or not opts["half_pixel_centers"]:
                raise ModelError("RESIZE_BILINEAR without half-pixel centres is not supported")
            self._add("resize", (x,), out, {"size": size}, rank4=True)
        elif name == "DEPTH_TO_SPACE":
            self._add("d2s", (x,), out, {"block": opts["block_size"]}, rank4=True)
        else:
            raise ModelError(f"TFLite op {name} is not supported by the torch port; "
                             "only MediaPipe's face detector and face mesh models are")

    def _fold_pads(self) -> None:
        """Let a convolution pad its own input where a PAD op feeds only it: a spatial zero
        pad, the same on both sides of each axis, before a convolution that pads nothing (the
        full-range detector's 43 PADs before its VALID convolutions). The PAD, a zero fill and
        a copy of the whole activation each, is then no kernel of its own: the convolution's
        zero padding gives the same sums."""
        uses: dict[int, int] = {}
        for index in [*(i for step in self.steps for i in _reads(step)), *self.output_indices]:
            uses[index] = uses.get(index, 0) + 1
        pads = {step.output: step for step in self.steps
                if step.kind == "pad" and step.output in self._rank4
                and _symmetric_spatial(step.params["pad"])}
        folded: set[int] = set()
        steps = []
        for step in self.steps:
            source = pads.get(step.inputs[0]) if step.kind == "conv" and step.inputs else None
            if (source is not None and uses[source.output] == 1
                    and step.params["pre_pad"] is None and step.params["padding"] == (0, 0)):
                left, _, top, _ = source.params["pad"][:4]
                step = _Step("conv", source.inputs, step.output,
                             {**step.params, "padding": (top, left)})
                folded.add(source.output)
            steps.append(step)
        self.steps = [s for s in steps if not (s.kind == "pad" and s.output in folded)]

    @staticmethod
    def _split_pad(pad: tuple[int, int, int, int]) -> dict[str, Any]:
        left, right, top, bottom = pad
        if left == right and top == bottom:  # symmetric: let the conv pad (no extra kernel)
            return {"pre_pad": None, "padding": (top, left)}
        return {"pre_pad": pad, "padding": (0, 0)}

    def _add(self, kind: str, inputs: tuple[int, ...], out: int, params: dict[str, Any], *,
             rank4: bool) -> None:
        if rank4:
            self._rank4.add(out)
        self.steps.append(_Step(kind, inputs, out, params))

    # ---- execution ------------------------------------------------------------------------
    def _value(self, values: list[torch.Tensor | None], ref: tuple[str, Any]) -> torch.Tensor:
        if ref[0] == "buf":
            buffer: torch.Tensor = getattr(self, ref[1])
            return buffer
        value = values[ref[1]]
        assert value is not None
        return value

    def forward(self, image_nchw: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values: list[torch.Tensor | None] = [None] * self._n_tensors
        values[self.input_index] = image_nchw
        for step in self.steps:
            p = step.params
            x = values[step.inputs[0]] if step.inputs else None
            y: torch.Tensor
            if step.kind == "conv":
                assert x is not None
                if p["pre_pad"] is not None:
                    x = F.pad(x, p["pre_pad"])
                bias = None if p["bias"] is None else getattr(self, p["bias"])
                y = _activation(_conv2d(x, getattr(self, p["weight"]), bias, p), p["act"])
            elif step.kind in ("add", "mul"):
                a, b = self._value(values, p["a"]), self._value(values, p["b"])
                y = _activation(a + b if step.kind == "add" else a * b, p["act"])
            elif step.kind == "relu":
                assert x is not None
                y = F.relu(x)
            elif step.kind == "prelu":
                assert x is not None
                alpha = getattr(self, p["alpha"])
                y = (F.prelu(x, alpha) if p["per_channel"]
                     else torch.where(x >= 0, x, x * alpha))
            elif step.kind == "pad":
                assert x is not None
                y = F.pad(x, p["pad"])
            elif step.kind == "maxpool":
                assert x is not None
                if p["pad"] is not None:
                    x = F.pad(x, p["pad"], value=float("-inf"))
                y = _activation(F.max_pool2d(x, p["kernel"], p["stride"]), p["act"])
            elif step.kind == "reshape":
                assert x is not None
                if p["from4"]:
                    x = x.permute(0, 2, 3, 1)
                y = x.reshape((x.shape[0], *p["shape"]))
                if p["to4"]:
                    y = y.permute(0, 3, 1, 2)
            elif step.kind == "concat":
                parts = [values[i] for i in step.inputs]
                y = _activation(torch.cat(parts, dim=p["axis"]), p["act"])  # type: ignore[arg-type]
            elif step.kind == "resize":
                assert x is not None
                y = _resize_bilinear(x, p["size"])
            elif step.kind == "d2s":
                assert x is not None
                # TF orders DEPTH_TO_SPACE channels (by, bx, c); torch's pixel_shuffle (c, by, bx).
                bs = p["block"]
                n, c, h, w = x.shape
                y = (x.reshape(n, bs, bs, c // (bs * bs), h, w).permute(0, 3, 4, 1, 5, 2)
                     .reshape(n, c // (bs * bs), h * bs, w * bs))
            elif step.kind == "identity":
                assert x is not None
                y = x
            else:  # pragma: no cover - _lower only emits the kinds above
                raise ModelError(f"unknown step {step.kind}")
            values[step.output] = y
        outs = []
        for index in self.output_indices:
            value = values[index]
            assert value is not None
            outs.append(value.permute(0, 2, 3, 1) if index in self._rank4 else value)
        return tuple(outs)

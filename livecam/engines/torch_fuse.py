"""Fusion of decomposed ONNX patterns into native torch ops, for :mod:`livecam.engines.torch_graph`.

Exported generators spell instance normalisation (and AdaIN, its style-modulated form) as a
chain of elementwise ONNX nodes::

    m = ReduceMean(x, spatial)   c = Sub(x, m)   v = ReduceMean(Pow(c, 2) | Mul(c, c), spatial)
    n = Div(c, Sqrt(Add(v, eps)))          [ y = Add(Mul(n, scale), shift) ]

Run node by node that is eight or nine kernels, six of them full passes over the activation; at
batch 1 on a GPU each costs a launch more than its arithmetic. :func:`fuse_instance_norm`
replaces a chain whose intermediates nothing else reads with one ``_InstanceNormAffine`` node:
one ``var_mean`` pass, a few ops on the (N, C, 1, 1) statistics, and one ``addcmul`` pass.
Same maths (population variance, eps inside the square root); in float32 it matches the chain
to rounding.
"""

from __future__ import annotations

from typing import Any

import torch

from livecam.engines.torch_ops import OPS, OpContext, Tensor

FUSED_OP = "_InstanceNormAffine"

RawNode = tuple[str, tuple[str, ...], tuple[str, ...], dict[str, Any]]


def _instance_norm_affine(a: list[Any], attrs: dict[str, Any], _ctx: OpContext) -> list[Tensor]:
    x, scale, shift = a[0], a[1], a[2]
    var, mean = torch.var_mean(x, dim=attrs["axes"], keepdim=True, correction=0)
    gain = torch.rsqrt(var + attrs["epsilon"])
    if scale is not None:
        gain = gain * scale
    # y = (x - mean) * gain + shift = x * gain + (shift - mean * gain): one pass over x
    offset = -mean * gain if shift is None else torch.addcmul(shift, mean, gain, value=-1.0)
    return [torch.addcmul(offset, x, gain)]


OPS[FUSED_OP] = _instance_norm_affine


def _spatial_axes(node: RawNode, consts: dict[str, Tensor]) -> tuple[int, ...] | None:
    """The reduction axes of a keepdims ReduceMean over the last two axes, else None."""
    _, inputs, _, attrs = node
    if not attrs.get("keepdims", 1):
        return None
    if "axes" in attrs:
        axes = [int(v) for v in attrs["axes"]]
    elif len(inputs) > 1 and inputs[1] in consts:
        axes = [int(v) for v in consts[inputs[1]].reshape(-1).tolist()]
    else:
        return None
    if sorted(axes) in ([2, 3], [-2, -1]):
        return (2, 3) if axes[0] >= 0 else (-2, -1)
    return None


def _scalar(name: str, consts: dict[str, Tensor]) -> float | None:
    value = consts.get(name)
    if value is None or value.numel() != 1:
        return None
    return float(value.reshape(()).item())


def fuse_instance_norm(raw: list[RawNode], consts: dict[str, Tensor],
                       outputs: tuple[str, ...]) -> tuple[list[RawNode], int]:
    """Replace instance-norm / AdaIN chains in ``raw`` (topologically ordered nodes after
    constant folding); returns the new node list and the number of chains fused."""
    producer: dict[str, int] = {}
    users: dict[str, list[int]] = {}
    for i, (_, inputs, outs, _) in enumerate(raw):
        for name in outs:
            producer[name] = i
        for name in inputs:
            if name and i not in users.get(name, []):  # Mul(c, c) reads c once
                users.setdefault(name, []).append(i)

    def only_user(name: str, op: str) -> int | None:
        """The index of the single node reading ``name`` if it is an ``op``, else None."""
        found = users.get(name, [])
        if len(found) == 1 and name not in outputs and raw[found[0]][0] == op:
            return found[0]
        return None

    def other(node: RawNode, name: str) -> str:
        a, b = node[1][0], node[1][1]
        return b if a == name else a

    drop: set[int] = set()
    replace: dict[int, RawNode] = {}
    for i_mean, node in enumerate(raw):
        if node[0] != "ReduceMean" or i_mean in drop:
            continue
        axes = _spatial_axes(node, consts)
        x, mean = node[1][0], node[2][0]
        i_sub = only_user(mean, "Sub")
        if axes is None or i_sub is None or raw[i_sub][1] != (x, mean):
            continue
        centred = raw[i_sub][2][0]
        readers = sorted(users.get(centred, []))
        if len(readers) != 2 or centred in outputs:
            continue
        i_sq, i_div = readers
        sq = raw[i_sq]
        if raw[i_div][0] != "Div" or raw[i_div][1][0] != centred:
            continue
        if not ((sq[0] == "Pow" and sq[1][0] == centred and _scalar(sq[1][1], consts) == 2.0)
                or (sq[0] == "Mul" and sq[1] == (centred, centred))):
            continue
        i_var = only_user(sq[2][0], "ReduceMean")
        if i_var is None or _spatial_axes(raw[i_var], consts) != axes:
            continue
        i_eps = only_user(raw[i_var][2][0], "Add")
        if i_eps is None:
            continue
        eps = _scalar(other(raw[i_eps], raw[i_var][2][0]), consts)
        i_sqrt = only_user(raw[i_eps][2][0], "Sqrt")
        if eps is None or i_sqrt is None or raw[i_div][1][1] != raw[i_sqrt][2][0]:
            continue
        if only_user(raw[i_sqrt][2][0], "Div") != i_div:
            continue
        chain = [i_mean, i_sub, i_sq, i_var, i_eps, i_sqrt, i_div]
        scale = shift = ""
        out = raw[i_div][2][0]
        i_mul = only_user(out, "Mul")
        if i_mul is not None:
            i_add = only_user(raw[i_mul][2][0], "Add")
            if i_add is not None:
                scale = other(raw[i_mul], out)
                shift = other(raw[i_add], raw[i_mul][2][0])
                if _defined_before(scale, i_mul, producer) and _defined_before(
                        shift, i_add, producer):
                    chain += [i_mul, i_add]
                    out = raw[i_add][2][0]
                else:
                    scale = shift = ""
        last = chain[-1]
        drop.update(chain)
        drop.discard(last)
        replace[last] = (FUSED_OP, (x, scale, shift), (out,),
                         {"axes": axes, "epsilon": eps, "_n_outputs": 1})
    fused = [replace.get(i, node) for i, node in enumerate(raw) if i not in drop]
    return fused, len(replace)


def _defined_before(name: str, index: int, producer: dict[str, int]) -> bool:
    """Whether ``name`` is a constant / graph input or produced before node ``index`` (the fused
    node sits at the chain's last position, so its inputs must exist by then)."""
    return producer.get(name, -1) < index

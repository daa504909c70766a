"""The op registry of the torch ONNX executor, and the load-time check of every node.

An op is registered with :func:`op`: its torch function, the ONNX attributes it understands,
the inputs it reads on the host (shape-like values) and an optional ``check`` that refuses the
attribute values / opsets it does not implement. :func:`check_node` runs when a model loads:
a node in another domain, an unknown op, an attribute the op does not declare, or a value its
check refuses raises :class:`UnsupportedNodeError` naming the node, the op and the attribute.
So a model either loads and computes what ``onnx.reference`` computes (tests/engines/ops), or
does not load: never silently different numbers.

Op functions are ``fn(args, attrs, ctx) -> list[Tensor]``. ``args`` holds one tensor per ONNX
input (None for an omitted optional input); ``attrs`` the node's attributes plus ``_name``,
``_opset`` and ``_n_outputs``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import torch

from livecam.core.errors import ModelError

Tensor = torch.Tensor

MIN_OPSET = 7  # before 7, elementwise ops broadcast by attribute (broadcast/axis), not numpy-style


class UnsupportedNodeError(ModelError, NotImplementedError):
    """A node the torch executor does not implement exactly (raised when the model loads)."""


@dataclass(frozen=True)
class OpContext:
    """What ops need besides their inputs: the float dtype and device values are computed in,
    and ``memo``, a per-module store for device tensors that depend only on shapes (index
    maps, interpolation weights): built in the first (eager) run, reused by later runs and by
    CUDA-graph capture, which cannot copy host memory to the device."""

    float_dtype: torch.dtype
    device: torch.device
    memo: dict[Any, Tensor] = field(default_factory=dict, compare=False)

    def cached(self, key: Any, build: Callable[[], np.ndarray], dtype: torch.dtype) -> Tensor:
        """The device tensor ``build()`` (a numpy array) for ``key``, built once per device."""
        full = (key, self.device, dtype)
        value = self.memo.get(full)
        if value is None:
            value = torch.from_numpy(np.ascontiguousarray(build())).to(self.device, dtype)
            self.memo[full] = value
        return value


OpFn = Callable[[list[Any], dict[str, Any], OpContext], list[Tensor]]


@dataclass(frozen=True)
class NodeInfo:
    """What a check sees of one node at load: values known then (initializers, constants and
    what was folded from them) and the element types ONNX type inference found."""

    name: str
    op: str
    attrs: Mapping[str, Any]
    inputs: tuple[str, ...]
    n_outputs: int
    opset: int
    consts: Mapping[str, Tensor]
    dtypes: Mapping[str, np.dtype]

    def has(self, pos: int) -> bool:
        return pos < len(self.inputs) and bool(self.inputs[pos])

    def const(self, pos: int) -> Tensor | None:
        """Input ``pos`` if its value is known at load, else None."""
        return self.consts.get(self.inputs[pos]) if self.has(pos) else None

    def dtype(self, pos: int) -> np.dtype | None:
        """Input ``pos``'s element type if known (inference, or a known value), else None."""
        if not self.has(pos):
            return None
        value = self.const(pos)
        if value is not None:
            return np.dtype(str(value.dtype).removeprefix("torch."))
        return self.dtypes.get(self.inputs[pos])

    def refuse(self, attr: str, value: Any, why: str = "") -> NoReturn:
        raise UnsupportedNodeError(
            f"node {self.name!r} ({self.op}, opset {self.opset}): {attr}={value!r} is not "
            f"supported by the torch engine{': ' + why if why else ''}; use engine.backend: "
            "onnxruntime for this model")


Check = Callable[[NodeInfo], None]


@dataclass(frozen=True)
class OpSpec:
    fn: OpFn
    attrs: frozenset[str]
    host_inputs: frozenset[int]
    check: Check | None


SPECS: dict[str, OpSpec] = {}
OPS: dict[str, OpFn] = {}
HOST_INPUTS: dict[str, frozenset[int]] = {}


def op(*names: str, attrs: tuple[str, ...] = (), host: tuple[int, ...] = (),
       check: Check | None = None) -> Callable[[OpFn], OpFn]:
    """Register ``fn`` for ONNX ops ``names``; see the module docstring."""

    def register(fn: OpFn) -> OpFn:
        for name in names:
            add(name, fn, attrs=attrs, host=host, check=check)
        return fn

    return register


def add(name: str, fn: OpFn, *, attrs: tuple[str, ...] = (), host: tuple[int, ...] = (),
        check: Check | None = None) -> None:
    SPECS[name] = OpSpec(fn, frozenset(attrs), frozenset(host), check)
    OPS[name] = fn
    if host:
        HOST_INPUTS[name] = frozenset(host)


def check_node(info: NodeInfo, domain: str) -> None:
    """Refuse ``info`` unless its op, attributes and values are implemented exactly."""
    if domain not in ("", "ai.onnx"):
        raise UnsupportedNodeError(
            f"node {info.name!r} ({info.op}): ops of domain {domain!r} are not supported by "
            "the torch engine; use engine.backend: onnxruntime for this model")
    spec = SPECS.get(info.op)
    if spec is None or info.op.startswith("_"):
        raise UnsupportedNodeError(
            f"node {info.name!r}: the torch engine cannot run op {info.op}; use "
            "engine.backend: onnxruntime for this model")
    for attr in info.attrs:
        if not attr.startswith("_") and attr not in spec.attrs:
            info.refuse(attr, info.attrs[attr], "the attribute is not implemented")
    if spec.check is not None:
        spec.check(info)


def text(value: Any) -> str:
    """An ONNX string attribute as ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)


def ints(t: Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def choice(info: NodeInfo, attr: str, default: str, allowed: tuple[str, ...]) -> str:
    """A string attribute that must be one of ``allowed`` (refused otherwise)."""
    value = text(info.attrs.get(attr, default))
    if value not in allowed:
        info.refuse(attr, value, f"expected one of {', '.join(allowed)}")
    return value


def runtime_error(attrs: Mapping[str, Any], what: str) -> UnsupportedNodeError:
    """For the few values only known when the graph runs (shapes computed at run time)."""
    return UnsupportedNodeError(f"node {attrs.get('_name', '?')!r}: {what} is not supported by "
                                "the torch engine; use engine.backend: onnxruntime")

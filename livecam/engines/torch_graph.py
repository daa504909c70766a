"""Execute an ONNX graph with torch: :class:`OnnxGraphModule`.

Written here rather than taken from onnx2torch because that package imports torchvision, which
breaks beside the torch builds we run on. The executor is a plain ``torch.nn.Module``:

- Initializers and ``Constant`` nodes become constants; every node whose inputs are all constant
  is evaluated once at load time on the CPU (constant folding).
- A placement pass splits values into *host* values (shapes and what is computed from them:
  ``Shape`` -> ``Gather`` -> ``Concat`` -> ``Reshape``'s shape input) and *device* values (the
  tensors). Host values stay small CPU int64/float32 tensors, so the device path never waits on
  the GPU and the whole forward can be captured in a CUDA graph for a fixed input shape.
- Device constants are registered as buffers in the compute dtype (float32 or float16), so
  ``module.to(device)`` places them and floats are computed in one dtype throughout. Every ONNX
  ``Cast`` to a float type casts to the compute dtype, so fp16-exported graphs (with Cast nodes at
  their inputs/outputs) run in either precision.
- Intermediate values are dropped after their last use to keep peak memory low.
- ``fuse=True`` (default) replaces decomposed instance-norm / AdaIN chains with one fused node
  (:mod:`livecam.engines.torch_fuse`): fewer kernels per frame, same maths.
- Every node is checked when the model loads (:func:`~.torch_opset.check_node`): an op,
  attribute or value the executor does not implement exactly is refused then, naming the node,
  the op and the attribute -- never computed differently from ``onnx.reference``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from livecam.engines.torch_fuse import fuse_instance_norm
from livecam.engines.torch_ops import HOST_INPUTS, MIN_OPSET, OPS, OpContext
from livecam.engines.torch_opset import NodeInfo, UnsupportedNodeError, check_node

_SHAPE_OPS = frozenset({"Shape", "Size"})


@dataclass(frozen=True)
class _Node:
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    host: bool
    free_after: tuple[str, ...]


def _attrs(node: Any, opset: int, index: int) -> dict[str, Any]:
    from onnx import helper

    out = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    out["_n_outputs"] = len(node.output)
    out["_opset"] = opset
    out["_name"] = node.name or f"{node.op_type}#{index}"
    return out


def model_opset(model: Any) -> int:
    """The default-domain opset the model imports; raises when it is older than we run."""
    opset = max((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")),
                default=0)
    if opset < MIN_OPSET:
        raise UnsupportedNodeError(
            f"ONNX opset {opset} is older than {MIN_OPSET}, the oldest the torch engine runs; "
            "re-export the model or use engine.backend: onnxruntime")
    return opset


def value_dtypes(model: Any) -> dict[str, np.dtype]:
    """Element types of the graph's values, by ONNX type inference on the graph without its
    weights (cheap for large models); values inference cannot type are left out."""
    from onnx import helper, shape_inference

    graph = model.graph
    declared = {v.name for v in graph.input}
    inits = [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
             for i in graph.initializer if i.name not in declared]
    light = helper.make_model(
        helper.make_graph(list(graph.node), graph.name, [*graph.input, *inits],
                          list(graph.output)), opset_imports=list(model.opset_import))
    light.ir_version = model.ir_version
    try:
        light = shape_inference.infer_shapes(light)
    except Exception:  # inference is a help for the checks, not a requirement
        log.debug("ONNX type inference failed for %s", graph.name, exc_info=True)
    out: dict[str, np.dtype] = {}
    for value in (*light.graph.input, *light.graph.value_info, *light.graph.output):
        elem = value.type.tensor_type.elem_type
        if elem:
            try:
                out[value.name] = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _to_tensor(array: np.ndarray) -> torch.Tensor:
    if array.dtype == np.float16 or array.dtype == np.float64:
        array = array.astype(np.float32)
    return torch.from_numpy(np.array(array, copy=True, order="C"))


def load_onnx(path: str | Path) -> Any:
    """Load an ONNX model (external data included) from ``path``."""
    import onnx

    return onnx.load(str(path))


log = logging.getLogger(__name__)


class OnnxGraphModule(torch.nn.Module):
    """An ONNX graph as a torch module.

    ``forward(*inputs)`` takes one tensor per graph input, in graph order (float inputs are cast
    to ``float_dtype``), and returns a tuple with one tensor per graph output, in the compute
    dtype. Shapes may differ from the declared ones where the graph allows (a batch of N).
    Raises :class:`~.torch_opset.UnsupportedNodeError` (a ``ModelError`` and a
    ``NotImplementedError``) at construction for the first node it does not implement exactly.
    """

    def __init__(self, model: Any, *, float_dtype: torch.dtype = torch.float32,
                 fuse: bool = True) -> None:
        super().__init__()
        from onnx import numpy_helper

        graph = model.graph
        self.float_dtype = float_dtype
        consts: dict[str, torch.Tensor] = {
            init.name: _to_tensor(numpy_helper.to_array(init)) for init in graph.initializer
        }
        self.input_names = tuple(i.name for i in graph.input if i.name not in consts)
        self.output_names = tuple(o.name for o in graph.output)
        missing: dict[str, str] = {}
        for n in graph.node:
            if n.op_type not in OPS and n.op_type != "Constant":
                missing.setdefault(n.op_type, n.name)
        if missing:  # every unknown op at once, each with the first node using it
            named = ", ".join(f"{op} (node {name!r})" for op, name in sorted(missing.items()))
            raise UnsupportedNodeError(
                f"the torch engine cannot run ops {named} of graph {graph.name!r}; "
                "use engine.backend: onnxruntime for this model")
        # shape-only device tensors (index maps, weights) built once (see OpContext.memo)
        self._memo: dict[Any, torch.Tensor] = {}
        self._host_ctx = OpContext(torch.float32, torch.device("cpu"), self._memo)
        raw = self._fold(model, consts)
        self.fused = 0
        if fuse:  # decomposed instance norm / AdaIN -> one native pass (see torch_fuse)
            raw, self.fused = fuse_instance_norm(raw, consts, self.output_names)
        # device->host reads (data-dependent shapes) of one eager run, for CUDA-graph capture
        self._host_record: dict[tuple[int, int], torch.Tensor] | None = None
        self._host_replay: dict[tuple[int, int], torch.Tensor] | None = None
        self._moved_values: dict[Any, tuple[torch.Tensor, torch.Tensor]] = {}
        self._consts_cpu = self._used_consts(raw, consts)
        self._nodes = self._place(raw)
        self._buffer_names: dict[str, str] = {}
        for node in self._nodes:
            for pos, name in enumerate(node.inputs):
                if (name in self._consts_cpu and not node.host
                        and pos not in HOST_INPUTS.get(node.op, ())
                        and name not in self._buffer_names):
                    value = self._consts_cpu[name]
                    if value.dtype.is_floating_point:
                        value = value.to(float_dtype)
                    buffer = f"const_{len(self._buffer_names)}"
                    self.register_buffer(buffer, value.clone(), persistent=False)
                    self._buffer_names[name] = buffer

    def _fold(self, model: Any, consts: dict[str, torch.Tensor]
              ) -> list[tuple[str, tuple[str, ...], tuple[str, ...], dict]]:
        """Check every node, evaluate the constant ones; returns the rest in graph order."""
        from onnx import numpy_helper

        opset = model_opset(model)
        dtypes = value_dtypes(model)
        kept = []
        for index, node in enumerate(model.graph.node):
            attrs = _attrs(node, opset, index)
            inputs = tuple(node.input)
            outputs = tuple(node.output)
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                consts[node.output[0]] = _constant_value(attrs, numpy_helper)
                continue
            check_node(NodeInfo(attrs["_name"], node.op_type, attrs, inputs, len(outputs),
                                opset, consts, dtypes), node.domain)
            if node.op_type not in _SHAPE_OPS and all(not n or n in consts for n in inputs):
                args = [consts[n] if n else None for n in inputs]
                with torch.no_grad():
                    values = OPS[node.op_type](args, attrs, self._host_ctx)
                consts.update(zip(outputs, values, strict=False))
                continue
            kept.append((node.op_type, inputs, outputs, attrs))
        return kept

    def _used_consts(self, raw: list[Any], consts: dict[str, torch.Tensor]
                     ) -> dict[str, torch.Tensor]:
        used = {n for _, inputs, _, _ in raw for n in inputs} | set(self.output_names)
        return {k: v for k, v in consts.items() if k in used}

    def _place(self, raw: list[Any]) -> list[_Node]:
        host_values: set[str] = set()
        last_use: dict[str, int] = {}
        for i, (_, inputs, _, _) in enumerate(raw):
            for name in inputs:
                if name and name not in self._consts_cpu:
                    last_use[name] = i
        frees: dict[int, list[str]] = {}
        for name, i in last_use.items():
            if name not in self.output_names:
                frees.setdefault(i, []).append(name)
        nodes = []
        for i, (op, inputs, outputs, attrs) in enumerate(raw):
            runtime = [n for n in inputs if n and n not in self._consts_cpu]
            host = op in _SHAPE_OPS or all(n in host_values for n in runtime)
            if host and op not in _SHAPE_OPS:
                # a node fed only by host values computes shapes, unless it is fed by nothing
                host = bool(runtime)
            if host:
                host_values.update(outputs)
            nodes.append(_Node(op, inputs, outputs, attrs, host, tuple(frees.get(i, ()))))
        return nodes

    @contextmanager
    def recording_host_values(self) -> Iterator[dict[tuple[int, int], torch.Tensor]]:
        """Remember every device->host read of the runs inside the block (see
        :meth:`replaying_host_values`)."""
        record: dict[tuple[int, int], torch.Tensor] = {}
        self._host_record = record
        try:
            yield record
        finally:
            self._host_record = None

    @contextmanager
    def replaying_host_values(self, record: dict[tuple[int, int], torch.Tensor]) -> Iterator[None]:
        """Use recorded host values instead of reading the device: a CUDA graph cannot capture
        a device->host copy. Valid only for inputs of the shapes the record was made with."""
        self._host_replay = record
        try:
            yield
        finally:
            self._host_replay = None

    @property
    def device(self) -> torch.device:
        for buf in self.buffers():
            return buf.device
        return torch.device("cpu")

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if len(inputs) != len(self.input_names):
            raise ValueError(f"expected {len(self.input_names)} inputs {self.input_names}, "
                             f"got {len(inputs)}")
        device = inputs[0].device if inputs else self.device
        ctx = OpContext(self.float_dtype, device, self._memo)
        env: dict[str, torch.Tensor] = {}
        for name, tensor in zip(self.input_names, inputs, strict=True):
            env[name] = tensor.to(self.float_dtype) if tensor.dtype.is_floating_point else tensor
        for index, node in enumerate(self._nodes):
            host_pos = HOST_INPUTS.get(node.op, frozenset())
            args: list[Any] = []
            for pos, name in enumerate(node.inputs):
                args.append(self._arg(index, node, pos, name, env, host_pos, device))
            values = OPS[node.op](args, node.attrs, self._host_ctx if node.host else ctx)
            for out, value in zip(node.outputs, values, strict=False):
                env[out] = value
            for name in node.free_after:
                env.pop(name, None)
        return tuple(self._output(name, env, device) for name in self.output_names)

    def _arg(self, index: int, node: _Node, pos: int, name: str, env: dict[str, torch.Tensor],
             host_pos: frozenset[int], device: torch.device) -> torch.Tensor | None:
        if not name:
            return None
        if name in env:
            value = env[name]
            if node.host or pos in host_pos:
                if value.device.type == "cpu" or node.op in _SHAPE_OPS:
                    return value  # Shape/Size read only the shape: no copy, no sync
                # a data-dependent shape: reading it waits on the device, so under CUDA-graph
                # capture the value recorded in an eager run of the same shapes is used
                if self._host_replay is not None:
                    return self._host_replay[(index, pos)]
                host = value.cpu()
                if self._host_record is not None:
                    self._host_record[(index, pos)] = host
                return host
            if value.device != device:  # a host value used as data (rare)
                return self._moved((index, pos), value, device)
            return value
        if node.host or pos in host_pos:
            return self._consts_cpu[name]
        return getattr(self, self._buffer_names[name])

    def _output(self, name: str, env: dict[str, torch.Tensor],
                device: torch.device) -> torch.Tensor:
        if name in env:
            return env[name]
        return self._moved(name, self._consts_cpu[name], device)

    def _moved(self, key: Any, host: torch.Tensor, device: torch.device) -> torch.Tensor:
        """``host`` on ``device`` in the compute dtype, copied once per value: these values
        come from shapes and constants and repeat from call to call, and a CUDA graph cannot
        capture a copy from pageable host memory (the eager runs before a capture fill this)."""
        kept = self._moved_values.get(key)
        if (kept is not None and kept[1].device == device and kept[0].shape == host.shape
                and torch.equal(kept[0], host)):
            return kept[1]
        value = host.to(device)
        if value.dtype.is_floating_point:
            value = value.to(self.float_dtype)
        self._moved_values[key] = (host.clone(), value)
        return value


def _constant_value(attrs: dict[str, Any], numpy_helper: Any) -> torch.Tensor:
    if "value" in attrs:
        return _to_tensor(numpy_helper.to_array(attrs["value"]))
    if "value_float" in attrs:
        return torch.tensor(float(attrs["value_float"]), dtype=torch.float32)
    if "value_floats" in attrs:
        return torch.tensor(list(attrs["value_floats"]), dtype=torch.float32)
    if "value_int" in attrs:
        return torch.tensor(int(attrs["value_int"]), dtype=torch.int64)
    if "value_ints" in attrs:
        return torch.tensor(list(attrs["value_ints"]), dtype=torch.int64)
    raise UnsupportedNodeError(f"node {attrs['_name']!r} (Constant): attributes "
                               f"{sorted(k for k in attrs if not k.startswith('_'))} are not "
                               "supported by the torch engine")

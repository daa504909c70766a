"""A small, dependency-free reader for TFLite flatbuffers (numpy + struct only).

Why not the ``tflite`` package: the GPU machine cannot install from a registry, and all we need
is the graph (tensors, operators, options) and the constant buffers of a handful of MediaPipe
models. Field numbers follow TensorFlow's ``lite/schema/schema.fbs``; a flatbuffer table stores
field ``i`` at vtable slot ``4 + 2 * i``.

Only what the MediaPipe face models use is decoded: operator options are read per operator
name (see ``_OPTION_FIELDS``) and sparse (``DENSIFY``) constants are expanded to dense arrays.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from livecam.core.errors import ModelError

# TensorType enum -> numpy dtype (only types that can hold constants in these models).
_TENSOR_DTYPES: dict[int, Any] = {
    0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64,
    6: np.bool_, 7: np.int16, 9: np.int8, 10: np.float64,
}

# BuiltinOperator enum values we know by name (others are reported as BUILTIN_<n>).
_BUILTIN_NAMES: dict[int, str] = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D",
    4: "DEPTHWISE_CONV_2D", 5: "DEPTH_TO_SPACE", 6: "DEQUANTIZE", 9: "FULLY_CONNECTED",
    14: "LOGISTIC", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU", 21: "RELU6", 22: "RESHAPE",
    23: "RESIZE_BILINEAR", 28: "TANH", 32: "CUSTOM", 34: "PAD", 41: "SUB", 45: "STRIDED_SLICE",
    54: "PRELU", 124: "DENSIFY",
}

# Option fields per operator: (name, field index, struct format or "int_vector", default).
_OPTION_FIELDS: dict[str, tuple[tuple[str, int, str, Any], ...]] = {
    "CONV_2D": (("padding", 0, "b", 0), ("stride_w", 1, "i", 1), ("stride_h", 2, "i", 1),
                ("activation", 3, "b", 0), ("dilation_w", 4, "i", 1), ("dilation_h", 5, "i", 1)),
    "DEPTHWISE_CONV_2D": (("padding", 0, "b", 0), ("stride_w", 1, "i", 1),
                          ("stride_h", 2, "i", 1), ("depth_multiplier", 3, "i", 1),
                          ("activation", 4, "b", 0), ("dilation_w", 5, "i", 1),
                          ("dilation_h", 6, "i", 1)),
    "MAX_POOL_2D": (("padding", 0, "b", 0), ("stride_w", 1, "i", 1), ("stride_h", 2, "i", 1),
                    ("filter_w", 3, "i", 1), ("filter_h", 4, "i", 1), ("activation", 5, "b", 0)),
    "AVERAGE_POOL_2D": (("padding", 0, "b", 0), ("stride_w", 1, "i", 1),
                        ("stride_h", 2, "i", 1), ("filter_w", 3, "i", 1),
                        ("filter_h", 4, "i", 1), ("activation", 5, "b", 0)),
    "ADD": (("activation", 0, "b", 0),),
    "MUL": (("activation", 0, "b", 0),),
    "CONCATENATION": (("axis", 0, "i", 0), ("activation", 1, "b", 0)),
    "RESHAPE": (("new_shape", 0, "int_vector", None),),
    "RESIZE_BILINEAR": (("align_corners", 2, "?", False), ("half_pixel_centers", 3, "?", False)),
    "DEPTH_TO_SPACE": (("block_size", 0, "i", 1),),
}

PADDING_SAME = 0
PADDING_VALID = 1


@dataclass(frozen=True)
class TfliteTensor:
    """One tensor of the graph; ``data`` is set for constants (already densified)."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: Any
    data: np.ndarray | None
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None


@dataclass(frozen=True)
class TfliteOperator:
    """One operator: its builtin name (or ``CUSTOM:<code>``), tensor indices and options."""

    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TfliteModel:
    """Subgraph 0 of a ``.tflite`` file: tensors, operators in execution order, graph I/O."""

    tensors: tuple[TfliteTensor, ...]
    operators: tuple[TfliteOperator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


class _Table:
    """A flatbuffer table: ``pos`` is the table start inside ``buf``."""

    __slots__ = ("buf", "pos", "vtable", "vtable_len")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vtable_len = struct.unpack_from("<H", buf, self.vtable)[0]

    def _offset(self, field_index: int) -> int:
        slot = 4 + 2 * field_index
        if slot >= self.vtable_len:
            return 0
        return int(struct.unpack_from("<H", self.buf, self.vtable + slot)[0])

    def scalar(self, field_index: int, fmt: str, default: Any) -> Any:
        off = self._offset(field_index)
        return default if off == 0 else struct.unpack_from("<" + fmt, self.buf, self.pos + off)[0]

    def _indirect(self, field_index: int) -> int | None:
        off = self._offset(field_index)
        if off == 0:
            return None
        at = self.pos + off
        return at + int(struct.unpack_from("<I", self.buf, at)[0])

    def table(self, field_index: int) -> _Table | None:
        at = self._indirect(field_index)
        return None if at is None else _Table(self.buf, at)

    def string(self, field_index: int) -> str:
        at = self._indirect(field_index)
        if at is None:
            return ""
        n = struct.unpack_from("<I", self.buf, at)[0]
        return self.buf[at + 4 : at + 4 + n].decode("utf-8", "replace")

    def vector(self, field_index: int, dtype: Any) -> np.ndarray:
        at = self._indirect(field_index)
        if at is None:
            return np.zeros((0,), dtype=dtype)
        n = struct.unpack_from("<I", self.buf, at)[0]
        return np.frombuffer(self.buf, dtype=np.dtype(dtype).newbyteorder("<"), count=n,
                             offset=at + 4).copy()

    def tables(self, field_index: int) -> list[_Table]:
        at = self._indirect(field_index)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.buf, at)[0]
        out = []
        for k in range(n):
            elem = at + 4 + 4 * k
            out.append(_Table(self.buf, elem + int(struct.unpack_from("<I", self.buf, elem)[0])))
        return out


def _sparse_index_vector(dim: _Table, type_field: int, value_field: int) -> np.ndarray:
    # Union SparseIndexVector: 1 Int32Vector, 2 Uint16Vector, 3 Uint8Vector (values = field 0).
    kind = dim.scalar(type_field, "B", 0)
    table = dim.table(value_field)
    if kind == 0 or table is None:
        return np.zeros((0,), dtype=np.int64)
    dtype = {1: np.int32, 2: np.uint16, 3: np.uint8}[kind]
    return table.vector(0, dtype).astype(np.int64)


def _densify(values: np.ndarray, shape: tuple[int, ...], sparsity: _Table) -> np.ndarray:
    """Expand a TFLite sparse constant (CSR per dimension, optional blocks) to a dense array."""
    traversal = sparsity.vector(0, np.int32).tolist()
    block_map = sparsity.vector(1, np.int32).tolist()
    dims = sparsity.tables(2)
    rank = len(shape)
    # Each traversal slot walks either an original dim or a block dim (id >= rank).
    dense_sizes: list[int] = []
    for dim in dims:
        if dim.scalar(0, "b", 0) == 0:
            dense_sizes.append(dim.scalar(1, "i", 0))
        else:
            dense_sizes.append(-1)
    # Block dims sit at traversal slots >= rank; their dense size is the block size.
    block_sizes = {dim_id: dense_sizes[level] for level, dim_id in enumerate(traversal)
                   if dim_id >= rank}
    out = np.zeros(shape, dtype=values.dtype)
    coords = [0] * len(traversal)
    stored = [0]

    def walk(level: int, prev_pos: int) -> None:
        dim = dims[level]
        if dim.scalar(0, "b", 0) == 0:  # DENSE
            size = dense_sizes[level]
            for i in range(size):
                coords[level] = i
                pos = prev_pos * size + i
                if level + 1 == len(traversal):
                    _store(pos)
                else:
                    walk(level + 1, pos)
        else:  # SPARSE_CSR
            segments = _sparse_index_vector(dim, 2, 3)
            indices = _sparse_index_vector(dim, 4, 5)
            for pos in range(int(segments[prev_pos]), int(segments[prev_pos + 1])):
                coords[level] = int(indices[pos])
                if level + 1 == len(traversal):
                    _store(pos)
                else:
                    walk(level + 1, pos)

    def _store(pos: int) -> None:
        original = [0] * rank
        for level, dim_id in enumerate(traversal):
            if dim_id < rank:
                block = block_sizes[rank + block_map.index(dim_id)] if dim_id in block_map else 1
                original[dim_id] += coords[level] * block
            else:
                original[block_map[dim_id - rank]] += coords[level]
        out[tuple(original)] = values[pos]
        stored[0] += 1

    walk(0, 0)
    if stored[0] != values.size:
        raise ModelError(f"sparse constant decoded {stored[0]} values but holds {values.size}: "
                         "the .tflite file is corrupt or uses an unsupported sparsity layout")
    return out


#: Parsed models by (resolved path, size, mtime): every stream of a process loads the same
#: detector and mesh files, and parsing (densifying the sparse detector above all) took about
#: 0.5 s per stream on the H200's host.
_CACHE: dict[tuple[str, int, int], TfliteModel] = {}
_CACHE_LOCK = threading.Lock()


def read_tflite(path: str | Path) -> TfliteModel:
    """Parse subgraph 0 of the ``.tflite`` file at ``path``.

    Returns a :class:`TfliteModel` whose constant tensors hold read-only numpy arrays in
    TFLite layout (NHWC activations, OHWI conv weights). The result is shared: a second call
    for the same unchanged file (same size and modification time) returns the same object.
    Any thread may call. Raises :class:`ModelError` if the file is not a TFLite flatbuffer.
    """
    resolved = Path(path).resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    with _CACHE_LOCK:  # one parse per file, however many streams open at once
        model = _CACHE.get(key)
        if model is None:
            for old in [k for k in _CACHE if k[0] == key[0]]:  # the file's earlier versions
                del _CACHE[old]
            model = _CACHE[key] = _parse(resolved.read_bytes(), path)
        return model


def _parse(buf: bytes, path: str | Path) -> TfliteModel:
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelError(f"{path} is not a TFLite model (no TFL3 identifier); pass a .tflite file")
    model = _Table(buf, int(struct.unpack_from("<I", buf, 0)[0]))
    op_codes = []
    for code in model.tables(1):
        builtin = max(int(code.scalar(0, "b", 0)), int(code.scalar(3, "i", 0)))
        name = _BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")
        op_codes.append(f"CUSTOM:{code.string(1)}" if name == "CUSTOM" else name)
    buffers = [b.vector(0, np.uint8) for b in model.tables(4)]
    subgraphs = model.tables(2)
    if not subgraphs:
        raise ModelError(f"{path} has no subgraph; the model file is corrupt")
    graph = subgraphs[0]

    tensors = []
    for index, t in enumerate(graph.tables(0)):
        shape = tuple(int(s) for s in t.vector(0, np.int32))
        type_id = int(t.scalar(1, "b", 0))
        dtype = _TENSOR_DTYPES.get(type_id, np.uint8)
        raw = buffers[t.scalar(2, "I", 0)] if buffers else np.zeros((0,), np.uint8)
        data = None
        if raw.size:
            flat = raw.view(np.dtype(dtype).newbyteorder("<")).astype(dtype)
            sparsity = t.table(6)
            data = flat.reshape(shape) if sparsity is None else _densify(flat, shape, sparsity)
            data.flags.writeable = False  # shared by every reader of the file (see _CACHE)
        quant = t.table(4)
        scale = zero_point = None
        if quant is not None:
            scale = quant.vector(2, np.float32) if quant.vector(2, np.float32).size else None
            zero_point = quant.vector(3, np.int64) if quant.vector(3, np.int64).size else None
        tensors.append(TfliteTensor(index=index, name=t.string(3), shape=shape, dtype=dtype,
                                    data=data, scale=scale, zero_point=zero_point))

    operators = []
    for op in graph.tables(3):
        name = op_codes[op.scalar(0, "I", 0)]
        options: dict[str, Any] = {}
        table = op.table(4)
        for key, idx, fmt, default in _OPTION_FIELDS.get(name, ()):
            if fmt == "int_vector":
                options[key] = None if table is None else table.vector(idx, np.int32).tolist()
            else:
                options[key] = default if table is None else table.scalar(idx, fmt, default)
        operators.append(TfliteOperator(
            name=name, inputs=tuple(int(i) for i in op.vector(1, np.int32)),
            outputs=tuple(int(i) for i in op.vector(2, np.int32)), options=options))
    return TfliteModel(tensors=tuple(tensors), operators=tuple(operators),
                       inputs=tuple(int(i) for i in graph.vector(1, np.int32)),
                       outputs=tuple(int(i) for i in graph.vector(2, np.int32)))

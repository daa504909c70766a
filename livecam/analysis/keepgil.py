"""Small numpy operations that keep the GIL, for the face follower's per-frame path.

With many streams in one process (one follower thread each) every release of the GIL is a
hand-over: another thread takes it, and the follower waits to get it back
(``scripts/bench_gil_streams.py``, ``scripts/count_gil_releases.py``). numpy 1.26 lets it go

- in an elementwise loop or a reduction over more than 500 elements
  (``NPY_BEGIN_THREADS_THRESHOLDED``), and in a reduction over one axis of a 2-D array such
  as ``(1, K).min(axis=1)``, even of fewer;
- in every copy of an array into another: ``a[...] = b``, ``copy``, ``astype``,
  ``np.array``/``np.stack`` of arrays, ``np.asarray`` with another dtype, a fancy index;
- in a ufunc whose two inputs differ in dtype (float32 with float64), whatever the size;
- in ``argmax`` and ``argmin``.

It keeps it in a ufunc of one dtype on at most 500 elements, also with ``out=`` a view and
with only the output cast (``np.positive(float32, out=float64)``), in a 1-D reduction of at
most 500 elements, in ``tolist`` and in ``np.array`` of Python floats. The helpers here cut
landmark-sized work into such pieces; everything they compute is what the plain numpy
expression gives, bit for bit (tests/analysis/test_keepgil.py).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

#: elements a ufunc may run over without numpy letting go of the GIL
MAX_HELD = 500
# ndarray.min/max without their Python wrappers
_min, _max = np.minimum.reduce, np.maximum.reduce


@functools.lru_cache(maxsize=64)
def row_chunks(rows: int, row_size: int) -> tuple[slice, ...]:
    """Slices cutting ``rows`` rows of ``row_size`` elements each into pieces of at most
    :data:`MAX_HELD` elements (at least one row each): (468, 2) landmarks are two pieces."""
    step = max(1, MAX_HELD // max(1, row_size))
    return tuple(slice(i, min(i + step, rows)) for i in range(0, rows, step))


def copy_into(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``dst[...] = src`` for float arrays of one shape (either float dtype: a cast rounds as
    ``astype`` does; integers of one dtype too), piece by piece so that numpy keeps the GIL;
    returns ``dst``.

    ``np.positive`` is the copy: ``+x`` is ``x`` bit for bit (``-0.0`` and NaN included).
    """
    for s in row_chunks(len(dst), dst[0].size if dst.ndim > 1 and len(dst) else 1):
        np.positive(src[s], out=dst[s])
    return dst


def joined(parts: list[np.ndarray], dtype: Any = None) -> np.ndarray:
    """``np.concatenate(parts).astype(dtype)`` (default: the first part's dtype) for numbers,
    not bools, keeping the GIL: one part already of ``dtype`` is itself (no copy); otherwise
    each is copied in pieces of at most :data:`MAX_HELD` numbers."""
    dtype = np.dtype(dtype if dtype is not None else parts[0].dtype)
    if len(parts) == 1 and parts[0].dtype == dtype:
        return parts[0]
    out = np.empty((sum(len(p) for p in parts), *parts[0].shape[1:]), dtype)
    start = 0
    for part in parts:
        copy_into(out[start:start + len(part)].reshape(-1), np.ravel(part))
        start += len(part)
    return out


def stacked(rows: list[np.ndarray]) -> np.ndarray:
    """``np.stack(rows)`` for one or more arrays of one shape and dtype (numbers, not bools),
    copied in pieces of at most :data:`MAX_HELD` numbers so that numpy keeps the GIL."""
    out = np.empty((len(rows), *rows[0].shape), rows[0].dtype)
    for dst, src in zip(out, rows, strict=True):
        copy_into(dst.reshape(-1), src.reshape(-1))
    return out


def extent_of(landmarks_xy: np.ndarray) -> tuple[Any, Any, Any, Any]:
    """x min, y min, x max, y max of one face's landmarks (K, 2) as numpy scalars of their
    dtype: one 1-D reduction per column keeps the GIL where ``(1, K)`` reductions over an axis
    do not, and costs ~1 us each rather than ~8 for a (K, 2) one over axis 0."""
    xs, ys = landmarks_xy[:, 0], landmarks_xy[:, 1]
    return _min(xs), _min(ys), _max(xs), _max(ys)


def box_of(landmarks_xy: np.ndarray) -> tuple[float, float, float, float]:
    """:func:`extent_of` as Python floats (the array's own values, exactly)."""
    x_lo, y_lo, x_hi, y_hi = extent_of(landmarks_xy)
    return float(x_lo), float(y_lo), float(x_hi), float(y_hi)

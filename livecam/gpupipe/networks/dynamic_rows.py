"""One compiled call for every row count from two up: the face count of the swap's parts.

The swap's alignment and paste-back run at 1, 2, 4, ... faces (padded up to a bucket); compiled
with static shapes, each bucket and paste window was a compile of its own (10 a part at 1080p,
3-39 s each on the H200). Here the arguments that count the call's rows (faces) are
marked with a dynamic first dimension for the compile
(:func:`torch._dynamo.maybe_mark_dynamic`), so one compiled call serves every count from two
up; a count of one compiles on its own (torch specialises sizes 0 and 1), and with static
shapes, as the one-face tick (the most common, the latency that matters) had before.

The calls themselves are made with unmarked tensors: a call saved whole
(:mod:`livecam.gpupipe.networks.precompiled`) and loaded refuses marked ones, and dynamo's own
compiled code, once compiled with the dimension dynamic, takes any count its guards allow
(checked on the CPU: ``tests/gpupipe/networks/test_dynamic_rows.py``). Where the code turns out
to depend on the exact count (a guard fails), :class:`~livecam.gpupipe.networks.compiled.
CompiledNetwork` compiles that count on its own, as before.
"""

from __future__ import annotations

from typing import Any

#: the bucket label of a dynamic row count in signatures and the shape plan
DYNAMIC = "2+"


def row_count(args: tuple[Any, ...], rows_args: tuple[int, ...]) -> int:
    """The call's row count: the first dimension of the first of ``rows_args`` (0 when there
    are none or it is no tensor)."""
    if not rows_args or rows_args[0] >= len(args):
        return 0
    shape = getattr(args[rows_args[0]], "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else 0


def dynamic(args: tuple[Any, ...], rows_args: tuple[int, ...]) -> bool:
    """Whether this call runs the dynamic compiled call (two rows or more)."""
    return row_count(args, rows_args) >= 2


def _rows_value(value: Any, rows: int, mark: bool) -> Any:
    """``value`` (a tensor, or a tuple of them, or None) with its first dimension, a multiple
    of ``rows``, made dynamic: in a signature (``mark`` False: the multiple instead of the
    size), or for the compile (``mark`` True: a marked view of the same memory)."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        if not len(shape) or rows <= 0 or int(shape[0]) % rows:
            return value if mark else (tuple(shape), str(value.dtype), str(value.device))
        if not mark:
            return ((f"{DYNAMIC} x {int(shape[0]) // rows}", *tuple(shape)[1:]),
                    str(value.dtype), str(value.device))
        import torch._dynamo

        view = value.view(value.shape)
        torch._dynamo.maybe_mark_dynamic(view, 0)
        return view
    if isinstance(value, tuple) and value:
        items = [_rows_value(v, rows, mark) for v in value]
        if mark:
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        return tuple(items)
    return value


def rows_signature(args: tuple[Any, ...], kwargs: dict[str, Any],
                   rows_args: tuple[int, ...], plain: Any) -> tuple[Any, ...]:
    """The signature of a dynamic call (:func:`dynamic`): ``plain(args, kwargs)`` (the static
    signature) with the row dimension of ``rows_args`` replaced by its multiple of the
    count, so every count from two up has the same one."""
    rows = row_count(args, rows_args)
    out = list(plain(args, kwargs))
    for i in rows_args:
        if i < len(args):
            out[i] = _rows_value(args[i], rows, mark=False)
    return (DYNAMIC, *out)


def marked(args: tuple[Any, ...], rows_args: tuple[int, ...]) -> tuple[Any, ...]:
    """``args`` with views of ``rows_args`` marked dynamic in their first dimension, for the
    compile (the same memory: running them runs the call on the originals)."""
    rows = row_count(args, rows_args)
    return tuple(_rows_value(a, rows, mark=True) if i in rows_args else a
                 for i, a in enumerate(args))


def guard_failed(exc: BaseException) -> bool:
    """Whether a loaded compiled call refused these inputs (its guards), before running."""
    return isinstance(exc, RuntimeError) and "GuardManager check failed" in str(exc)

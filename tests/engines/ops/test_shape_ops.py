"""Shape and indexing ONNX ops of the torch executor against onnx.reference: negative axes,
optional inputs, axes as attribute (old opsets) or input (new), and host (shape) inputs given
as initializers or as graph inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engines.ops.onnx_case import compare

RNG = np.random.default_rng(1)
SETTINGS = settings(max_examples=30, deadline=None)
I64 = np.int64


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _i(values: list[int] | int) -> np.ndarray:
    return np.array(values, dtype=I64)


BOTH = pytest.mark.parametrize("consts", [(), ("s",)], ids=["input", "initializer"])


@BOTH
@pytest.mark.parametrize(("shape", "target", "allowzero"), [
    ((2, 3, 4), [6, 4], 0), ((2, 3, 4), [0, -1], 0), ((2, 3, 4), [-1], 0),
    ((2, 3, 4), [0, 0, 2, 2], 0), ((2, 0, 4), [0, 4], 1), ((2, 3, 4), [4, 0, 2], 0),
])
def test_reshape(consts: tuple[str, ...], shape: tuple[int, ...], target: list[int],
                 allowzero: int) -> None:
    attrs = {"allowzero": allowzero} if allowzero else {}
    compare("Reshape", [("x", _x(shape)), ("s", _i(target))], opset=14, consts=consts, **attrs)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, 3, -1, -3])
def test_flatten(axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    compare("Flatten", [("x", _x((2, 3, 4)))], opset=13, **attrs)


@pytest.mark.parametrize("perm", [None, [0, 1, 2], [2, 0, 1], [1, 2, 0]])
def test_transpose(perm: list[int] | None) -> None:
    attrs = {} if perm is None else {"perm": perm}
    compare("Transpose", [("x", _x((2, 3, 4)))], opset=13, **attrs)


# onnx.reference applies opset-11 axes one by one in the given order, so unordered axes
# are only compared at opset 13
@pytest.mark.parametrize(("opset", "axes"), [
    *[(11, axes) for axes in ([0], [-1], [1, 3], [0, -1])],
    *[(13, axes) for axes in ([0], [-1], [1, 3], [-1, 0], [4, 1])]])
def test_unsqueeze(opset: int, axes: list[int]) -> None:
    x = _x((2, 3, 4)) if len(axes) > 1 else _x((3, 4))
    if opset < 13:
        compare("Unsqueeze", [("x", x)], opset=opset, axes=axes)
    else:
        compare("Unsqueeze", [("x", x), ("s", _i(axes))], opset=opset, consts=("s",))
        compare("Unsqueeze", [("x", x), ("s", _i(axes))], opset=opset)


@pytest.mark.parametrize(("opset", "axes"), [
    *[(11, axes) for axes in (None, [0], [-1], [0, 2])],
    *[(13, axes) for axes in (None, [0], [-1], [0, 2], [2, -5])]])
def test_squeeze(opset: int, axes: list[int] | None) -> None:
    x = _x((1, 3, 1, 4, 1))
    if opset < 13:
        attrs = {} if axes is None else {"axes": axes}
        compare("Squeeze", [("x", x)], opset=opset, **attrs)
    else:
        compare("Squeeze", [("x", x), ("s", None if axes is None else _i(axes))],
                opset=opset, consts=("s",))


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat(axis: int) -> None:
    compare("Concat", [("a", _x((2, 3))), ("b", _x((2, 3))), ("c", _x((2, 3)))], opset=13,
            axis=axis)


def test_concat_with_an_empty_part() -> None:
    compare("Concat", [("a", _x((2, 3))), ("b", _x((2, 0))), ("c", _x((2, 1)))], opset=13,
            axis=1)


@pytest.mark.parametrize(("start", "end"), [(None, None), (1, None), (-2, None), (0, 2),
                                            (1, -1), (-10, 10), (3, 1)])
def test_shape_start_end(start: int | None, end: int | None) -> None:
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    compare("Shape", [("x", _x((2, 3, 4)))], opset=15, **attrs)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [_i(1), _i(-1), _i([0, 2, -1]), _i([[0, 1], [-2, 0]])])
def test_gather(axis: int, indices: np.ndarray) -> None:
    compare("Gather", [("x", _x((3, 3, 4))), ("s", indices)], opset=13, axis=axis)
    compare("Gather", [("x", _x((3, 3, 4))), ("s", indices)], opset=13, axis=axis,
            consts=("s",))


BIG = 2**63 - 1


@st.composite
def slice_case(draw: st.DrawFn) -> tuple[tuple[int, ...], list[int], list[int], list[int],
                                        list[int]]:
    shape = tuple(draw(st.integers(1, 5)) for _ in range(draw(st.integers(1, 3))))
    n_axes = draw(st.integers(1, len(shape)))
    axes = draw(st.permutations(range(len(shape))))[:n_axes]
    axes = [a - len(shape) if draw(st.booleans()) else a for a in axes]
    bound = st.one_of(st.integers(-7, 7), st.sampled_from([BIG, -BIG]))
    starts = [draw(bound) for _ in axes]
    ends = [draw(bound) for _ in axes]
    steps = [draw(st.sampled_from([1, 2, 3, -1, -2])) for _ in axes]
    return shape, starts, ends, axes, steps


@SETTINGS
@given(case=slice_case(), as_const=st.booleans(), omit=st.sampled_from(["", "steps", "both"]))
def test_slice_inputs(case: tuple, as_const: bool, omit: str) -> None:
    shape, starts, ends, axes, steps = case
    inputs = [("x", _x(shape)), ("st", _i(starts)), ("en", _i(ends)),
              ("ax", None if omit == "both" else _i(axes)),
              ("sp", None if omit else _i(steps))]
    if omit == "both":
        inputs[1] = ("st", _i(starts[:len(shape)]))
        inputs[2] = ("en", _i(ends[:len(shape)]))
        if len(starts) != len(shape):
            return
    while inputs[-1][1] is None:
        inputs.pop()
    compare("Slice", inputs, opset=13, consts=("st", "en", "ax", "sp") if as_const else ())


@pytest.mark.parametrize(("starts", "ends", "axes"), [
    ([0], [2], None), ([1, -3], [BIG, -1], [1, 0]), ([-1], [-BIG], [2]), ([5], [1], None),
])
def test_slice_attributes_before_opset_10(starts: list[int], ends: list[int],
                                          axes: list[int] | None) -> None:
    attrs = {"starts": starts, "ends": ends}
    if axes is not None:
        attrs["axes"] = axes
    compare("Slice", [("x", _x((4, 3, 5)))], opset=9, **attrs)


@BOTH
@pytest.mark.parametrize(("shape", "target"), [((3, 1), [2, 3, 4]), ((3, 4), [4]),
                                               ((1,), [2, 1, 3]), ((2, 1, 4), [1, 3, 1])])
def test_expand(consts: tuple[str, ...], shape: tuple[int, ...], target: list[int]) -> None:
    compare("Expand", [("x", _x(shape)), ("s", _i(target))], opset=13, consts=consts)


@BOTH
@pytest.mark.parametrize("repeats", [[1, 1], [2, 3], [3, 1]])
def test_tile(consts: tuple[str, ...], repeats: list[int]) -> None:
    compare("Tile", [("x", _x((2, 3))), ("s", _i(repeats))], opset=13, consts=consts)


@pytest.mark.parametrize("value", [None, np.array([1.5], np.float32), np.array([7], np.int64),
                                   np.array([3], np.int32)])
@pytest.mark.parametrize("shape", [[2, 3], [0], [4]])
def test_constant_of_shape(value: np.ndarray | None, shape: list[int]) -> None:
    from onnx import numpy_helper

    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "value")}
    compare("ConstantOfShape", [("s", _i(shape))], opset=13, **attrs)


@pytest.mark.parametrize(("opset", "split", "n_out", "axis"), [
    (11, None, 3, 1), (11, [1, 2, 3], 3, 1), (11, [2, 4], 2, -1), (13, None, 2, 1),
    (13, [4, 2], 2, 1), (13, [1, 1, 4], 3, -1), (18, None, 4, 1), (18, None, 2, 1),
    (18, [3, 3], 2, 1),
])
def test_split(opset: int, split: list[int] | None, n_out: int, axis: int) -> None:
    x = _x((2, 6, 5)) if axis == 1 else _x((2, 5, 6))
    attrs: dict = {"axis": axis}
    inputs = [("x", x)]
    if opset < 13 and split is not None:
        attrs["split"] = split
    elif split is not None:
        inputs.append(("s", _i(split)))
    if opset >= 18 and split is None:
        attrs["num_outputs"] = n_out
    compare("Split", inputs, opset=opset, n_outputs=n_out, consts=("s",), **attrs)


def test_split_18_uneven_last_chunk_is_smaller() -> None:
    compare("Split", [("x", _x((2, 7)))], opset=18, n_outputs=3, axis=1, num_outputs=3)


REDUCE_INPUT_AXES = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18}


@pytest.mark.parametrize("op", sorted(REDUCE_INPUT_AXES))
@pytest.mark.parametrize("axes", [None, [1], [-1], [0, 2], [-3, -1]])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("new_opset", [False, True])
def test_reduce(op: str, axes: list[int] | None, keepdims: int, new_opset: bool) -> None:
    x = _x((2, 3, 4))
    if new_opset:
        opset = REDUCE_INPUT_AXES[op]
        compare(op, [("x", x), ("s", None if axes is None else _i(axes))], opset=opset,
                consts=("s",), keepdims=keepdims)
    else:
        attrs = {} if axes is None else {"axes": axes}
        compare(op, [("x", x)], opset=11, keepdims=keepdims, **attrs)


@pytest.mark.parametrize("op", sorted(REDUCE_INPUT_AXES))
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_empty_axes(op: str, noop: int) -> None:
    compare(op, [("x", _x((2, 3))), ("s", np.zeros(0, I64))], opset=REDUCE_INPUT_AXES[op],
            consts=("s",), noop_with_empty_axes=noop)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_reduce_ints_keep_their_dtype(op: str, dtype: str) -> None:
    x = RNG.integers(-5, 6, (2, 3)).astype(dtype)
    compare(op, [("x", x)], opset=11, axes=[1])


def test_reduce_axes_from_a_graph_input_are_read_at_run_time() -> None:
    compare("ReduceSum", [("x", _x((2, 3, 4))), ("s", _i([0, -1]))], opset=13)


def test_split_with_a_non_constant_split_input_runs() -> None:
    compare("Split", [("x", _x((2, 6))), ("s", _i([2, 4]))], opset=13, n_outputs=2, axis=1)


@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4)])
def test_size(shape: tuple[int, ...]) -> None:
    compare("Size", [("x", _x(shape))], opset=13)

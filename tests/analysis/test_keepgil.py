"""The GIL-keeping helpers compute what the plain numpy expressions do, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.analysis.keepgil import MAX_HELD, box_of, copy_into, joined, row_chunks, stacked


@pytest.mark.parametrize(("rows", "row_size"), [(0, 2), (1, 2), (468, 2), (478, 2), (250, 2),
                                                (251, 2), (468, 1), (1200, 1), (3, 936)])
def test_row_chunks_cover_every_row_once_in_small_pieces(rows: int, row_size: int) -> None:
    pieces = row_chunks(rows, row_size)
    covered = [i for s in pieces for i in range(rows)[s]]
    assert covered == list(range(rows))
    for s in pieces:
        n = len(range(rows)[s])
        assert n >= 1
        assert n * row_size <= MAX_HELD or n == 1


@pytest.mark.parametrize("src_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dst_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(468, 2), (478, 2), (468,), (7, 3), (0, 2)])
def test_copy_into_is_assignment_bit_for_bit(src_dtype: type, dst_dtype: type,
                                             shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    src = (rng.normal(0, 1, shape) * 10 ** rng.uniform(-3, 30, shape)).astype(src_dtype)
    if src.size > 2:
        src.flat[0], src.flat[1], src.flat[2] = -0.0, np.nan, np.inf
    want = np.empty(shape, dst_dtype)
    want[...] = src
    dst = np.full(shape, 7.0, dst_dtype)
    assert copy_into(dst, src) is dst
    assert dst.tobytes() == want.tobytes()


def test_copy_into_writes_a_row_of_a_batch_only() -> None:
    batch = np.zeros((3, 468, 2), np.float32)
    src = np.arange(936, dtype=np.float64).reshape(468, 2) / 3
    copy_into(batch[1], src)
    assert batch[1].tobytes() == src.astype(np.float32).tobytes()
    assert not batch[0].any() and not batch[2].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_box_of_is_the_min_and_max_of_each_column(dtype: type) -> None:
    rng = np.random.default_rng(1)
    xy = rng.uniform(-50, 1900, (468, 2)).astype(dtype)
    box = box_of(xy)
    assert all(type(v) is float for v in box)
    assert box == (*xy.min(axis=0).tolist(), *xy.max(axis=0).tolist())


@pytest.mark.parametrize("shape", [(512,), (468, 2), (5, 2), (3, 20, 2)])
@pytest.mark.parametrize("rows", [1, 4])
def test_stacked_is_np_stack_bit_for_bit(shape: tuple[int, ...], rows: int) -> None:
    rng = np.random.default_rng(2)
    parts = [rng.normal(0, 1e3, shape).astype(np.float32) for _ in range(rows)]
    parts[0].flat[0] = np.nan
    got = stacked(parts)
    want = np.stack(parts)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_joined_is_concatenate_and_astype_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    parts = [rng.normal(0, 1e3, (n, 512)) for n in (1, 3, 2)]
    got = joined(parts, np.float32)
    want = np.concatenate(parts).astype(np.float32)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    one = parts[1].astype(np.float32)
    assert joined([one], np.float32) is one  # nothing to join or cast: no copy

"""Pixel boost against a plain reference implementation of the sub-pixel tiling (below), on
the inswapper stand-in and real faces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.swap.boost import boost_factor, merge_tiles, split_tiles
from livecam.swap.inswapper import InswapperModel, paste_back
from tests.helpers.standins import build_inswapper


def reference_boost(crop: np.ndarray, swap_128: Callable[[np.ndarray], np.ndarray],
                    k: int) -> np.ndarray:
    """The tiling written plainly: the k*k sub-images crop[i::k, j::k], each swapped on its
    own, written back where they came from."""
    out = np.zeros_like(crop)
    for i in range(k):
        for j in range(k):
            out[i::k, j::k] = swap_128(np.ascontiguousarray(crop[i::k, j::k]))
    return out


def test_split_and_merge_are_the_plain_tiling() -> None:
    crops = np.random.default_rng(0).integers(0, 256, (3, 512, 512, 3), dtype=np.uint8)
    for k in (2, 4):
        tiles = split_tiles(crops, k)
        assert tiles.shape == (3 * k * k, 512 // k, 512 // k, 3)
        for n in range(3):
            for i in range(k):
                for j in range(k):
                    np.testing.assert_array_equal(tiles[n * k * k + i * k + j],
                                                  crops[n, i::k, j::k])
        np.testing.assert_array_equal(merge_tiles(tiles, k), crops)


def test_boost_factor_refuses_sizes_that_do_not_tile() -> None:
    assert boost_factor(512, 128) == 4
    for bad in (64, 200):
        with pytest.raises(ValueError, match="multiple"):
            boost_factor(bad, 128)


@pytest.fixture(scope="module")
def swapper_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_inswapper(tmp_path_factory.mktemp("boost") / "inswapper_128.onnx")


@pytest.mark.parametrize("boost_px", [256, 512])
def test_boosted_swap_matches_the_reference_tiling(boost_px: int, swapper_path: Path,
                                                   astronaut_bgr: np.ndarray) -> None:
    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo

    kps = five_point(analyze_photo(astronaut_bgr).landmarks_xy)
    plain = InswapperModel(OnnxRuntimeEngine(swapper_path, device="cpu"), swapper_path)
    boosted = InswapperModel(OnnxRuntimeEngine(swapper_path, device="cpu"), swapper_path,
                             pixel_boost_px=boost_px)
    plain.open()
    boosted.open()
    latent = plain.latents(np.random.default_rng(1).standard_normal((1, 512)))
    crops, matrices = boosted.align(astronaut_bgr, kps)
    assert crops.shape == (1, boost_px, boost_px, 3)
    k = boost_px // 128
    expected = reference_boost(crops[0], lambda tile: plain.swap_crops(tile[None], latent)[0], k)
    ours = boosted.swap_crops(crops, latent)
    np.testing.assert_array_equal(ours[0], expected)
    # the boosted face is pasted with insightface's mask at its own size, over the same region
    out = boosted.swap(astronaut_bgr, kps, latent)
    np.testing.assert_array_equal(out, paste_back(astronaut_bgr, expected, matrices[0]))
    base = plain.swap(astronaut_bgr, kps, latent)
    changed = (out != astronaut_bgr).any(axis=-1)
    changed_base = (base != astronaut_bgr).any(axis=-1)
    overlap = (changed & changed_base).sum() / max(changed_base.sum(), 1)
    assert overlap > 0.95, "the boosted face covers another region than the plain swap"
    plain.close()
    boosted.close()

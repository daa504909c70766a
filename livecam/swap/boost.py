"""Pixel boost: a 128 px swap model run at 256 or 512 px by sub-pixel tiling.

The face is aligned at ``k * 128`` px; that crop is split into ``k * k`` interleaved 128 px
sub-images (sub-image (i, j) holds the crop's pixels (i + k a, j + k b)), each sub-image is
swapped with the same source latent, and the swapped sub-images are interleaved back into one
``k * 128`` px face. Every sub-image is a slightly shifted, full view of the face at the model's
own scale, so the model sees what it was trained on, and the result has k times the detail of
the plain 128 px output. Cost: k * k generator runs per face (4 at 256, 16 at 512).
"""

from __future__ import annotations

import numpy as np

BOOST_SIZES_PX = (128, 256, 512)


def boost_factor(boost_px: int, model_px: int) -> int:
    """k for a ``boost_px`` crop from a ``model_px`` model; raises ValueError unless it is a
    whole multiple."""
    if boost_px < model_px or boost_px % model_px:
        raise ValueError(f"pixel boost {boost_px} px is not a multiple of the model's "
                         f"{model_px} px")
    return boost_px // model_px


def split_tiles(crops: np.ndarray, k: int) -> np.ndarray:
    """(N, k s, k s, C) -> (N k k, s, s, C): tile ``n * k * k + i * k + j`` is
    ``crops[n, i::k, j::k]``."""
    n, size, _, c = crops.shape
    s = size // k
    tiles = crops.reshape(n, s, k, s, k, c).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(tiles.reshape(n * k * k, s, s, c))


def merge_tiles(tiles: np.ndarray, k: int) -> np.ndarray:
    """The inverse of :func:`split_tiles`: (N k k, s, s, C) -> (N, k s, k s, C)."""
    nkk, s, _, c = tiles.shape
    n = nkk // (k * k)
    crops = tiles.reshape(n, k, k, s, s, c).transpose(0, 3, 1, 4, 2, 5)
    return np.ascontiguousarray(crops.reshape(n, s * k, s * k, c))

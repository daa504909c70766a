"""Pixel boost's sub-pixel tiling on tensors: the GPU twin of :mod:`livecam.swap.boost`.

Pure reshapes and permutes (no host sync, static shapes), so the GPU pipeline can capture them
in its graphs: crops (N, k s, k s, C) -> tiles (N k k, s, s, C) before the generator, and back
after it. Latents go with them repeated k * k times (:func:`repeat_latents`).
"""

from __future__ import annotations

import torch


def split_tiles(crops_nhwc: torch.Tensor, k: int) -> torch.Tensor:
    """(N, k s, k s, C) -> (N k k, s, s, C): tile ``n k k + i k + j`` is
    ``crops[n, i::k, j::k]``."""
    n, size, _, c = crops_nhwc.shape
    s = size // k
    tiles = crops_nhwc.reshape(n, s, k, s, k, c).permute(0, 2, 4, 1, 3, 5)
    return tiles.reshape(n * k * k, s, s, c)


def merge_tiles(tiles_nhwc: torch.Tensor, k: int) -> torch.Tensor:
    """The inverse of :func:`split_tiles`: (N k k, s, s, C) -> (N, k s, k s, C)."""
    nkk, s, _, c = tiles_nhwc.shape
    n = nkk // (k * k)
    crops = tiles_nhwc.reshape(n, k, k, s, s, c).permute(0, 3, 1, 4, 2, 5)
    return crops.reshape(n, s * k, s * k, c)


def repeat_latents(latents: torch.Tensor, k: int) -> torch.Tensor:
    """(N, D) -> (N k k, D): each face's latent for each of its tiles, in tile order."""
    return latents.repeat_interleave(k * k, dim=0)

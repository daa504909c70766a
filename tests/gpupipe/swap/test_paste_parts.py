"""The paste-back's cheaper formulations against the plain ones they replace
(``livecam.gpupipe.swap.paste``, ``livecam.gpupipe.swap.keep``): the banded-matrix blur against the
grouped convolution, the float32 window grid and the one-kernel crop sampler against
``warp.affine_grid_px`` and ``warp.sample_bilinear_hwc`` (bit for bit)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from livecam.gpupipe.swap.blend import window_origins
from livecam.gpupipe.swap.keep import gaussian_taps, separable_blur
from livecam.gpupipe.swap.paste import crop_grid_planes, gaussian_weights, sample_crop_zero_border
from livecam.gpupipe.swap.warp import affine_grid_px, sample_bilinear_hwc


def conv_blur(images_nhw: torch.Tensor, taps_nk: torch.Tensor) -> torch.Tensor:
    """The grouped separable convolution the paste-back used (zero border)."""
    n, pad = images_nhw.shape[0], taps_nk.shape[1] // 2
    out = F.conv2d(images_nhw[None], taps_nk[:, None, :, None], padding=(pad, 0), groups=n)
    return F.conv2d(out, taps_nk[:, None, None, :], padding=(0, pad), groups=n)[0]


@pytest.mark.parametrize(("side", "ksize"), [(9, 9), (40, 11), (97, 67), (160, 33)])
def test_banded_blur_equals_the_convolution(side: int, ksize: int) -> None:
    """Random images and per-face taps as long as the window (taps reach past every edge);
    a transposed or shifted band, or a one-sided zero border, differs by far more."""
    gen = torch.Generator().manual_seed(side)
    images = torch.rand((3, side, side), generator=gen)
    images[1, :, : side // 2] = 0.0  # a hard edge
    taps = gaussian_weights(torch.tensor([ksize, 3, max(3, ksize // 2 | 1)]), ksize)
    want = conv_blur(images, taps)
    np_max = float((separable_blur(images, taps) - want).abs().max())
    assert np_max <= 1e-5
    scaled = separable_blur(images, taps, scale=torch.tensor([1.0, 0.0, 0.5]))
    assert float(scaled[1].abs().max()) == 0.0
    assert float((scaled[2] - 0.5 * want[2]).abs().max()) <= 1e-5


def test_banded_blur_is_exactly_one_inside_a_region() -> None:
    """Inside a region the blurred alpha is 1 exactly, not 0.99999994 (a blend truncated to
    uint8 loses a grey level there), and exactly 0 beyond the taps' reach."""
    mask = torch.zeros((2, 128, 128))
    mask[:, 30:100, 20:90] = 1.0
    taps = gaussian_taps(torch.tensor([3.0, 1.2]), 33)
    out = separable_blur(mask, taps)
    assert bool((out[:, 50:80, 40:70] == 1.0).all())
    assert float(out[:, :10].abs().max()) == 0.0 and float(out[:, :, 110:].abs().max()) == 0.0
    assert float((out - conv_blur(mask, taps)).abs().max()) <= 1e-5


def random_matrices(n: int, seed: int, scale_max: float) -> torch.Tensor:
    """(N, 2, 3) float64 frame -> crop similarities: any rotation, scales up to ``scale_max``,
    shifts that put the crop anywhere near a 1080p frame."""
    gen = torch.Generator().manual_seed(seed)
    angle = torch.rand(n, generator=gen, dtype=torch.float64) * 2 * math.pi
    scale = 0.2 + torch.rand(n, generator=gen, dtype=torch.float64) * (scale_max - 0.2)
    centre = torch.rand((n, 2), generator=gen, dtype=torch.float64) * torch.tensor([1920, 1080])
    cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
    lin = torch.stack((torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), 1)
    shift = 64.0 - (lin @ centre[:, :, None])[..., 0]
    return torch.cat((lin, shift[:, :, None]), dim=-1)


@pytest.mark.parametrize(("seed", "scale_max"), [(0, 1.0), (1, 4.0), (2, 20.0)])
def test_window_grid_equals_opencvs_fixed_point(seed: int, scale_max: float) -> None:
    """The float32 grid is ``affine_grid_px``'s (float64) bit for bit on windows placed as the
    paste-back places them, up to crops 6 px wide in the frame; and on any window wherever
    the whole window reads within 16384 px of the crop (farther, both are far outside it).
    A grid off by one 1/32 step, or a half-pixel shift, fails."""
    mats = random_matrices(24, seed, scale_max)
    origin = window_origins(mats, 128, 640, 1080, 1920)
    want = affine_grid_px(mats, 640, 640, origin).permute(0, 3, 1, 2)
    assert torch.equal(crop_grid_planes(mats, 640, origin), want)
    gen = torch.Generator().manual_seed(seed + 10)
    anywhere = (torch.rand((24, 2), generator=gen) * torch.tensor([1280, 440])).long()
    want = affine_grid_px(mats, 640, 640, anywhere).permute(0, 3, 1, 2)
    got = crop_grid_planes(mats, 640, anywhere)
    near = want.abs().flatten(1).amax(dim=1) < 16384.0
    assert int(near.sum()) >= 12 and torch.equal(got[near], want[near])


@pytest.mark.parametrize("size", [128, 96])
def test_crop_sampler_equals_the_gather_sampler(size: int) -> None:
    """Integer-valued crops sampled at 1/32 px positions in and around them (zero outside):
    the same values as the four-tap gather, bit for bit, at any crop size."""
    gen = torch.Generator().manual_seed(size)
    crops = torch.randint(0, 256, (3, size, size, 3), generator=gen).float()
    mats = random_matrices(3, size, 1.5)
    mats[:, :, 2] += size / 2.0 - 64.0
    origin = window_origins(mats, size, 200, 1080, 1920)
    grid = affine_grid_px(mats, 200, 200, origin)
    want = sample_bilinear_hwc(crops, torch.arange(3), grid, border="constant",
                               round_uint8=True)
    got = sample_crop_zero_border(crops, grid.permute(0, 3, 1, 2))
    assert float(want.abs().sum()) > 0 and float((want == 0).float().mean()) > 0.05
    assert torch.equal(got.permute(0, 2, 3, 1), want)

"""Affine warps on tensors that reproduce ``cv2.warpAffine`` (bilinear).

OpenCV's pixel convention: integer coordinates are pixel *centres*; ``warpAffine(src, M, dsize)``
writes ``dst(x, y) = src(M^-1 (x, y))`` (with ``WARP_INVERSE_MAP``: ``src(M (x, y))``), so no
half-pixel shift is involved. ``torch.nn.functional.grid_sample(align_corners=False)`` maps the
normalised -1..1 range to pixel *edges* instead, so a source coordinate ``x`` must be passed as
``(2x + 1) / W - 1`` to agree; getting that wrong shifts every crop by half a pixel. We avoid the
question entirely with a gather-based bilinear sampler on pixel coordinates, which also reads
uint8 frames directly (only the sampled pixels are converted to float, never the whole frame).

OpenCV rounds source positions to 1/32 pixel (``INTER_TAB_SIZE``) and uint8 results to integers;
both are reproduced (``opencv_subpixel=True``, the default) so crops match the CPU path to about
one grey level. All functions are pure, allocate only their outputs and contain no host syncs or
data-dependent shapes, so they can be captured in CUDA graphs. Any thread that owns the tensors.
"""

from __future__ import annotations

import torch

_SUBPIXEL_STEPS = 32.0  # OpenCV INTER_TAB_SIZE
BORDERS = ("constant", "replicate")


def invert_affine(matrix_2x3: torch.Tensor) -> torch.Tensor:
    """Inverse of (..., 2, 3) affine matrices (``cv2.invertAffineTransform``), same dtype.
    A singular matrix gives zeros (no exception: this runs inside CUDA graphs)."""
    lin = matrix_2x3[..., :2]
    shift = matrix_2x3[..., 2:]
    a, b = lin[..., 0, 0], lin[..., 0, 1]
    c, d = lin[..., 1, 0], lin[..., 1, 1]
    det = (a * d - b * c)[..., None, None]
    adj = torch.stack((d, -b, -c, a), dim=-1).reshape(lin.shape)
    inv_lin = torch.where(det != 0, adj / torch.where(det != 0, det, 1.0), 0.0)
    return torch.cat((inv_lin, -(inv_lin @ shift)), dim=-1)


def affine_grid_px(matrix_2x3: torch.Tensor, height_px: int, width_px: int,
                   origin_xy_px: torch.Tensor | None = None, *,
                   opencv_fixed_point: bool = True) -> torch.Tensor:
    """Source positions (N, h, w, 2) (x, y px) where output pixel (x, y) reads ``M (x, y, 1)``.

    ``matrix_2x3`` (N, 2, 3) maps *output* pixels to *source* pixels (OpenCV's inverse map).
    ``origin_xy_px`` (N, 2), optional: the output grid starts at this pixel instead of (0, 0)
    (used to evaluate a window of a frame without slicing by data-dependent offsets).
    ``opencv_fixed_point`` computes positions the way ``cv2.warpAffine`` does: the x and y
    terms rounded separately to 1/1024 px, then floored to 1/32 px (in float64); without it the
    positions are exact floats. At a hard edge a 1/32 px difference is worth ~8 grey levels,
    so this is what makes crops match OpenCV's pixel for pixel.
    """
    m = matrix_2x3.double() if opencv_fixed_point else matrix_2x3.float()
    dtype = m.dtype
    device = m.device
    xs = torch.arange(width_px, device=device, dtype=dtype)[None, None, :]  # (1, 1, w)
    ys = torch.arange(height_px, device=device, dtype=dtype)[None, None, :]  # (1, 1, h)
    if origin_xy_px is not None:
        xs = xs + origin_xy_px[:, None, 0, None].to(dtype)  # (N, 1, w)
        ys = ys + origin_xy_px[:, None, 1, None].to(dtype)
    # both output coordinates at once: row r of M gives source x (r = 0) and y (r = 1)
    x_term = m[:, :, 0, None] * xs  # (N, 2, w)
    y_term = m[:, :, 1, None] * ys + m[:, :, 2, None]  # (N, 2, h)
    if opencv_fixed_point:
        scale = 1024.0  # OpenCV AB_SCALE; + 16 = half of one 1/32 step, then >> 5
        x_term = torch.round(x_term * scale)
        y_term = torch.round(y_term * scale) + 16.0
        src = torch.floor((y_term[:, :, :, None] + x_term[:, :, None, :]) / 32.0) / 32.0
    else:
        src = y_term[:, :, :, None] + x_term[:, :, None, :]  # (N, 2, h, w)
    return src.permute(0, 2, 3, 1).float()


def sample_bilinear_hwc(images_bhwc: torch.Tensor, image_index: torch.Tensor,
                        grid_xy: torch.Tensor, *, border: str = "constant",
                        border_value: float | torch.Tensor = 0.0, opencv_subpixel: bool = True,
                        round_uint8: bool | None = None) -> torch.Tensor:
    """Bilinear samples (N, h, w, C) float32 of ``images_bhwc`` at ``grid_xy`` (N, h, w, 2).

    ``images_bhwc``: (B, H, W, C) uint8 or float, any device. ``image_index``: (N,) int64, the
    image each output reads. ``border``: ``"constant"`` (taps outside read ``border_value``,
    OpenCV BORDER_CONSTANT; a (C,) tensor gives one value per channel) or ``"replicate"``
    (nearest edge pixel, BORDER_REPLICATE).
    ``round_uint8`` (default: when the input is uint8) rounds results to integers like OpenCV's
    uint8 warp does.
    """
    if border not in BORDERS:
        raise ValueError(f"border must be one of {BORDERS}, got {border!r}")
    batch, height, width, channels = images_bhwc.shape
    pos = grid_xy.float()
    if opencv_subpixel:
        pos = torch.round(pos * _SUBPIXEL_STEPS) / _SUBPIXEL_STEPS
    p0 = torch.floor(pos)
    frac = pos - p0  # (N, h, w, 2)
    # the four taps in one gather: offsets (0,0), (1,0), (0,1), (1,1); far-away positions are
    # clamped first so the integer conversion cannot overflow
    step = torch.arange(4, device=pos.device)
    tx = p0[..., 0].clamp(-2, width + 1).long()[..., None] + step % 2  # (N, h, w, 4)
    ty = p0[..., 1].clamp(-2, height + 1).long()[..., None] + step // 2
    index = (image_index.long().reshape(-1, 1, 1, 1) * (height * width)
             + ty.clamp(0, height - 1) * width + tx.clamp(0, width - 1))
    values = images_bhwc.reshape(batch * height * width, channels)[index].float()  # (N,h,w,4,C)
    if border == "constant":
        inside = (tx >= 0) & (tx < width) & (ty >= 0) & (ty < height)
        values = torch.where(inside[..., None], values, border_value)
    fx, fy = frac[..., 0:1], frac[..., 1:2]  # (N, h, w, 1)
    top = values[..., 0, :] * (1 - fx) + values[..., 1, :] * fx
    bottom = values[..., 2, :] * (1 - fx) + values[..., 3, :] * fx
    out = top * (1 - fy) + bottom * fy
    if round_uint8 is None:
        round_uint8 = images_bhwc.dtype == torch.uint8
    if round_uint8:
        out = torch.round(out)
    return out


def warp_affine(images_bhwc: torch.Tensor, image_index: torch.Tensor,
                matrix_2x3: torch.Tensor, height_px: int, width_px: int, *,
                inverse_map: bool = False, border: str = "constant", border_value: float = 0.0,
                opencv_subpixel: bool = True) -> torch.Tensor:
    """``cv2.warpAffine`` of N images: (N, h, w, C) float32 (integer-valued for uint8 input).

    ``matrix_2x3`` (N, 2, 3) maps source pixels to output pixels, as ``cv2.warpAffine``'s M;
    with ``inverse_map=True`` it maps output to source (``cv2.WARP_INVERSE_MAP``).
    """
    inverse = matrix_2x3 if inverse_map else invert_affine(matrix_2x3.double()).float()
    grid = affine_grid_px(inverse, height_px, width_px)
    return sample_bilinear_hwc(images_bhwc, image_index, grid, border=border,
                               border_value=border_value, opencv_subpixel=opencv_subpixel)

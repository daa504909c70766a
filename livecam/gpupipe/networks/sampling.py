"""Bilinear crops from uint8 frames that reproduce MediaPipe's CPU ``ImageToTensorCalculator``.

MediaPipe maps the ROI's corners onto the tensor's corners (``cv::getPerspectiveTransform``) and
samples with ``cv::warpPerspective(INTER_LINEAR)`` on the uint8 image: output pixel ``(u, v)``
reads the source at ``corner + u * step`` (no half-pixel shift), OpenCV quantises the position
to 1/32 pixel, and the result is rounded back to uint8 before scaling to the float range. We do
the same with gathers of the four neighbours, so a crop touches only T*T*4 source pixels and the
full frame is never converted to float.
"""

from __future__ import annotations

import torch

# OpenCV's INTER_TAB_SIZE: sub-pixel positions are rounded to 1/32 pixel.
_SUBPIXEL_STEPS = 32.0


def rotated_rect_grid(center_xy_px: torch.Tensor, size_px: torch.Tensor, rotation_rad: torch.Tensor,
                      out_size: int) -> torch.Tensor:
    """Source positions (N, T, T, 2) (x, y in pixels) of a T x T crop of N rotated squares.

    ``center_xy_px`` (N, 2), ``size_px`` (N, 2) as (width, height), ``rotation_rad`` (N,): the
    ROI as MediaPipe's ``RotatedRect``; output pixel (u, v) maps to
    ``center + (u/T - 1/2) * w * (cos, sin) + (v/T - 1/2) * h * (-sin, cos)``.
    """
    steps = torch.arange(out_size, device=center_xy_px.device, dtype=torch.float32) / out_size - 0.5
    cos = torch.cos(rotation_rad.float())[:, None, None]
    sin = torch.sin(rotation_rad.float())[:, None, None]
    u = steps[None, None, :] * size_px[:, 0, None, None].float()
    v = steps[None, :, None] * size_px[:, 1, None, None].float()
    x = center_xy_px[:, 0, None, None].float() + u * cos - v * sin
    y = center_xy_px[:, 1, None, None].float() + u * sin + v * cos
    return torch.stack((x, y), dim=-1)


def sample_bilinear_u8(images_bhwc: torch.Tensor, image_index: torch.Tensor, grid_xy: torch.Tensor,
                       *, border_zero: bool, channel_order: tuple[int, int, int]) -> torch.Tensor:
    """Crop N patches from a batch of uint8 frames; returns (N, 3, T, T) float32 in 0..255.

    ``images_bhwc``: (B, H, W, 3) uint8 on any device. ``image_index``: (N,) int64, the frame
    each crop reads. ``grid_xy``: (N, T, T, 2) source positions in pixels. ``border_zero``: pixels
    outside the frame read 0 (MediaPipe BORDER_ZERO) instead of the nearest edge pixel
    (BORDER_REPLICATE). ``channel_order`` picks and orders the output channels (``(2, 1, 0)``
    turns BGR frames into the RGB tensors MediaPipe's models expect). Values are rounded to
    integers like OpenCV's uint8 warp.
    """
    _, height, width, _ = images_bhwc.shape
    device = images_bhwc.device
    pos = torch.round(grid_xy * _SUBPIXEL_STEPS) / _SUBPIXEL_STEPS
    corner = torch.floor(pos)
    frac = pos - corner  # (N, T, T, 2): fx, fy
    # The four neighbours (x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1) in one
    # (N, 4, T, T, 2) tensor: one gather and one weighting for the four, not a dozen small
    # ops each. Constants are made on the device (no host->device copy), so a CUDA graph can
    # capture this.
    k = torch.arange(4, device=device)
    neighbours = torch.stack((k % 2, k // 2), dim=-1)[:, None, None, :]  # (4, 1, 1, 2)
    taps = corner.long()[:, None] + neighbours
    last = torch.empty(2, device=device, dtype=torch.long)
    last[0:1].fill_(width - 1)
    last[1:2].fill_(height - 1)
    clamped = torch.minimum(taps.clamp(min=0), last)
    # each tap's pixel in the frames seen as rows of 3 bytes: frame * H * W + y * W + x
    strides = torch.empty(2, device=device, dtype=torch.long)
    strides[0:1].fill_(1)
    strides[1:2].fill_(width)
    pixel = ((clamped * strides).sum(-1)
             + (image_index.long() * (height * width))[:, None, None, None])
    # a gather of whole pixels (N, 4, T, T, 3): a third of the indices a gather of bytes needs
    value = images_bhwc.reshape(-1, 3)[pixel].float()
    if border_zero:  # a tap outside the frame reads 0
        value = value * (clamped == taps).all(-1, keepdim=True).float()
    fx, fy = frac[..., 0:1], frac[..., 1:2]  # (N, T, T, 1)
    gx = 1 - fx
    top = value[:, 0] * gx + value[:, 1] * fx
    bottom = value[:, 2] * gx + value[:, 3] * fx
    pixels = torch.round(top * (1 - fy) + bottom * fy)  # (N, T, T, 3), the frames' channels
    return torch.stack([pixels[..., c] for c in channel_order], dim=1)

"""Feathered masks, colour gain and paste-back on tensors (CPU twins in ``livecam.swap.blend``
and ``livecam.swap.colour``).

Paste-back writes a fixed ``window_px`` square of the frame around each face instead of the
face's exact bounding box, so shapes never depend on data and a whole frame's work can be
captured in one CUDA graph. Pixels of the window where the warped alpha is 0 are written back
unchanged, so the result equals ``blend.paste_back_affine`` as long as the face's alpha
footprint fits in the window (:func:`paste_footprint_px` says how big it is; the pipeline reports
faces that did not fit). Windows are pasted one face after the other, so overlapping faces
compose exactly like the CPU path. Any thread that owns the tensors.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from livecam.gpupipe.swap.warp import affine_grid_px, invert_affine, sample_bilinear_hwc

_MIN_GAIN, _MAX_GAIN = 0.25, 4.0


def ellipse_kernel(radius_px: int) -> np.ndarray:
    """``cv2.getStructuringElement(MORPH_ELLIPSE, (2r+1, 2r+1))`` as (2r+1, 2r+1) float32 0/1."""
    size = 2 * radius_px + 1
    r = c = size // 2
    out = np.zeros((size, size), np.float32)
    inv_r2 = 1.0 / (r * r) if r else 0.0
    for i in range(size):
        dy = i - r
        if abs(dy) <= r:
            dx = int(np.rint(c * np.sqrt((r * r - dy * dy) * inv_r2)))
            out[i, max(c - dx, 0):min(c + dx + 1, size)] = 1.0
    return out


def box_blur(images_nchw: torch.Tensor, ksize: int, *, border: str) -> torch.Tensor:
    """``cv2.blur`` with an odd ``ksize``: ``border`` ``"constant"`` (zeros, still divided by
    the full window) or ``"replicate"``. (N, C, h, w) float in, same shape out."""
    pad = ksize // 2
    if border == "replicate":
        padded = F.pad(images_nchw, (pad, pad, pad, pad), mode="replicate")
        return F.avg_pool2d(padded, ksize, stride=1)
    return F.avg_pool2d(images_nchw, ksize, stride=1, padding=pad, count_include_pad=True)


def feather_mask(mask_nchw: torch.Tensor, *, erode_px: float, blur_px: float) -> torch.Tensor:
    """Soft alpha (N, 1, h, w) float32 in [0, 1] from hard masks (N, 1, h, w) (>0.5 = inside).

    Same operations as ``livecam.swap.blend.feather_mask``: erosion by an elliptic kernel of
    radius ``round(erode_px)`` with everything outside the image counting as outside the mask,
    then two box blurs of size ``round(blur_px) | 1`` with a zero border.
    """
    outside = (mask_nchw < 0.5).float()
    radius = round(erode_px)
    if radius > 0:
        kernel = torch.from_numpy(ellipse_kernel(radius)).to(mask_nchw.device)[None, None]
        # outside the image is outside the mask (BORDER_CONSTANT 0): pad "outside" with ones
        padded = F.pad(outside, (radius, radius, radius, radius), value=1.0)
        outside = (F.conv2d(padded, kernel) > 0.5).float()
    alpha = 1.0 - outside
    k = round(blur_px)
    if k > 0:
        alpha = box_blur(box_blur(alpha, k | 1, border="constant"), k | 1, border="constant")
    return alpha


def lowfreq_gain(source_nchw: torch.Tensor, target_nchw: torch.Tensor, weight_n1hw: torch.Tensor,
                 blur_px: float) -> torch.Tensor:
    """(N, 3, h, w) float32 gain so ``source * gain`` carries the target's low-frequency light.

    ``source_nchw`` / ``target_nchw``: (N, 3, h, w) values 0..255 on the same grid; ``weight``
    (N, 1, h, w) is 1 on skin both share. Same maths as ``livecam.swap.colour.lowfreq_gain``.
    """
    k = max(3, round(blur_px)) | 1
    eps = 1e-3

    def weighted(img: torch.Tensor) -> torch.Tensor:
        once = box_blur((img.float() + 1.0) * weight_n1hw, k, border="replicate")
        return box_blur(once, k, border="replicate") + eps

    return (weighted(target_nchw) / weighted(source_nchw)).clamp(_MIN_GAIN, _MAX_GAIN)


def support_corners(support_xyxy: tuple[float, float, float, float]) -> torch.Tensor:
    """(4, 2) float32 corners of a box in crop px (build once, keep on the device)."""
    x1, y1, x2, y2 = support_xyxy
    return torch.tensor([[x1, y1], [x2, y1], [x1, y2], [x2, y2]], dtype=torch.float32)


def paste_footprint_px(matrix_2x3: torch.Tensor, corners_4x2: torch.Tensor) -> torch.Tensor:
    """(N, 2) width/height in frame px of the alpha's support box (``corners_4x2`` from
    :func:`support_corners`, on the same device) mapped back through ``matrix_2x3`` (N, 2, 3,
    frame -> crop). A face whose footprint exceeds the paste window is cut at the window."""
    inv = invert_affine(matrix_2x3.double()).float()
    pts = torch.einsum("nij,kj->nki", inv[:, :, :2], corners_4x2) + inv[:, None, :, 2]
    return pts.amax(dim=1) - pts.amin(dim=1)


def window_origins(matrix_2x3: torch.Tensor, crop_px: int, window_px: int, frame_h: int,
                   frame_w: int) -> torch.Tensor:
    """(N, 2) int64 top-left corners of ``window_px`` squares centred on each crop's centre in
    the frame, clamped inside a ``frame_h`` x ``frame_w`` frame."""
    inv = invert_affine(matrix_2x3.double()).float()
    centre = torch.full((2,), crop_px / 2.0, device=inv.device, dtype=torch.float32)
    frame_centre = inv[:, :, :2] @ centre + inv[:, :, 2]
    origin = torch.floor(frame_centre - window_px / 2.0)
    ox = origin[:, 0].clamp(0, frame_w - window_px)
    oy = origin[:, 1].clamp(0, frame_h - window_px)
    return torch.stack((ox, oy), dim=-1).long()


def paste_back_affine_(frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
                       faces_nhwc: torch.Tensor, alpha_n1hw: torch.Tensor,
                       matrix_2x3: torch.Tensor, *, window_px: int,
                       face_is_uint8: bool = True) -> torch.Tensor:
    """Blend N aligned face crops back into their frames, in place; returns ``frames_bhwc_u8``.

    - ``frames_bhwc_u8``: (B, H, W, 3) uint8 BGR, written in place.
    - ``frame_index``: (N,) int64, the frame each face belongs to.
    - ``faces_nhwc``: (N, s, s, 3) float BGR 0..255 in crop pixels; ``face_is_uint8`` rounds
      its warp to integers as the CPU path does with a uint8 face.
    - ``alpha_n1hw``: (N or 1, 1, s, s) float alpha in crop pixels (0 = keep the frame); zero
      it for padding slots.
    - ``matrix_2x3``: (N, 2, 3) frame px -> crop px (the alignment that cut the crop).

    Equals ``livecam.swap.blend.paste_back_affine`` (face warped with BORDER_REPLICATE, alpha with
    a zero border, ``out = base + alpha * (face - base)``, rounded) wherever the alpha's
    footprint fits inside the ``window_px`` window.
    """
    batch, height, width, _ = frames_bhwc_u8.shape
    n = faces_nhwc.shape[0]
    win = min(window_px, height, width)
    origin = window_origins(matrix_2x3, faces_nhwc.shape[1], win, height, width)
    grid = affine_grid_px(matrix_2x3, win, win, origin)
    crop_index = torch.arange(n, device=faces_nhwc.device)
    face_win = sample_bilinear_hwc(faces_nhwc, crop_index, grid, border="replicate",
                                   round_uint8=face_is_uint8)
    alpha_nhwc = alpha_n1hw.permute(0, 2, 3, 1).float()
    alpha_index = crop_index if alpha_nhwc.shape[0] == n else torch.zeros_like(crop_index)
    alpha_win = sample_bilinear_hwc(alpha_nhwc, alpha_index, grid, border="constant")
    flat = frames_bhwc_u8.reshape(batch * height * width, 3)
    ys = torch.arange(win, device=flat.device)[None, :, None]
    xs = torch.arange(win, device=flat.device)[None, None, :]
    pixel = (frame_index.long()[:, None, None] * (height * width)
             + (origin[:, 1, None, None] + ys) * width + origin[:, 0, None, None] + xs)
    # one face after the other: a later face blends over an earlier one, as on the CPU
    for i in range(n):
        idx = pixel[i].reshape(-1)
        base = flat[idx].float()
        a = alpha_win[i].reshape(-1, 1)
        mixed = base + a * (face_win[i].reshape(-1, 3) - base)
        flat[idx] = torch.floor(mixed.clamp(0.0, 255.0) + 0.5).to(torch.uint8)
    return frames_bhwc_u8

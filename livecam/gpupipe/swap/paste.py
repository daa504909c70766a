"""insightface's paste-back (``INSwapper.get(paste_back=True)``) on tensors, static shapes.

The CPU twin is :func:`livecam.swap.inswapper.paste_back`: warp a white crop into the frame,
threshold it (> 20 -> 255), erode it with a k1 x k1 square and Gaussian-blur it with a
(2 k2 + 1) kernel, where k1 = max(size // 10, 10), k2 = max(size // 20, 5) and ``size`` is the
geometric mean of the mask's bounding box; then ``alpha * face + (1 - alpha) * frame``,
truncated to uint8. Kernel sizes depend on the face size, which a CUDA graph cannot have as a
shape, so:

- the threshold region is computed analytically: a bilinear white square sampled at crop
  coordinates (u, v) is 255 * cov(u) * cov(v) with cov(t) = clamp(min(t + 1, s - t), 0, 1),
  taken as the rectangle where each coverage exceeds 20/255 (the two differ on sub-pixel
  corner patches only);
- erosion of that convex region by a box is exact from the box's corners (a box lies in a
  convex set iff its corners do), and since (u, v) is affine in (x, y) the extreme corners
  along u and v are known per face: four comparisons per pixel. The region's thin fringe
  (values <= 20, one pixel wide) is taken as 0, which changes alpha by < 0.1 at most on that
  one-pixel band before blurring;
- the Gaussian is a separable convolution with per-face weights of a fixed maximum length,
  zero beyond each face's own radius, built on the device from the measured size.

All of it runs on a ``window_px`` square around each face (see ``livecam.gpupipe.swap.blend``).
Any thread that owns the tensors; no host syncs.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from livecam.gpupipe.swap.blend import window_origins
from livecam.gpupipe.swap.keep import KeepLoops, kept_alpha, oval_alpha, separable_blur

_THRESHOLD = 20.0 / 255.0  # insightface: mask[mask > 20] = 255 on a 0..255 white crop


def gaussian_weights(ksize: torch.Tensor, max_ksize: int) -> torch.Tensor:
    """(N, max_ksize) float32 centred Gaussian taps of OpenCV's ``getGaussianKernel(ksize, 0)``
    for odd per-face ``ksize`` (N,) (sigma = 0.3 ((ksize - 1) / 2 - 1) + 0.8), zero-padded."""
    half = max_ksize // 2
    x = torch.arange(-half, half + 1, device=ksize.device, dtype=torch.float64)[None, :]
    k = ksize.double()[:, None]
    sigma = 0.3 * ((k - 1.0) * 0.5 - 1.0) + 0.8
    w = torch.exp(-(x * x) / (2.0 * sigma * sigma)) * (x.abs() <= (k - 1.0) / 2.0).double()
    return (w / w.sum(dim=1, keepdim=True)).float()


def insightface_paste_(frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
                       faces_nhwc: torch.Tensor, matrix_2x3: torch.Tensor,
                       face_valid: torch.Tensor, *, window_px: int,
                       hands_bhw_u8: torch.Tensor | None = None,
                       keep: KeepLoops | None = None) -> torch.Tensor:
    """Paste N swapped crops into their frames in place, as insightface does; returns frames.

    - ``frames_bhwc_u8`` (B, H, W, 3) uint8 BGR, written in place, faces one after the other.
    - ``frame_index`` (N,) int64; ``face_valid`` (N,) bool (False: the slot is padding and
      leaves the frame untouched).
    - ``faces_nhwc`` (N, s, s, 3) float BGR with integer values 0..255 (the uint8 model output).
    - ``matrix_2x3`` (N, 2, 3) frame px -> crop px.
    - ``hands_bhw_u8`` (B, H, W) uint8 or None: hands kept in front, ``keep`` the streamer's
      eyes and mouth (see :func:`blend_windows_`).

    Also returns nothing about clipping; use :func:`mask_fits_window` for that.
    """
    height, width = frames_bhwc_u8.shape[1], frames_bhwc_u8.shape[2]
    size = faces_nhwc.shape[1]
    win = min(window_px, height, width)
    origin = window_origins(matrix_2x3, size, win, height, width)
    uv = crop_grid_planes(matrix_2x3, win, origin)  # (N, 2, win, win) crop px
    fake = sample_crop_zero_border(faces_nhwc, uv)  # (N, 3, win, win)
    # the thresholded white crop: cov(u) * cov(v) > 20 / 255, taken as the rectangle where
    # each coverage alone exceeds it (they differ on sub-pixel corner patches only)
    lo_edge = _THRESHOLD - 1.0
    hi_edge = size - _THRESHOLD
    inside = ((uv > lo_edge) & (uv < hi_edge)).all(dim=1)  # (N, win, win)
    # size of the mask: sqrt of its bounding box (pixel-index extents, as np.where gives)
    steps = torch.arange(win, device=uv.device, dtype=torch.float32)
    big = float(win * 4)

    def span(hit: torch.Tensor) -> torch.Tensor:  # (N, win) bool -> (N,) last - first hit
        hit_f = hit.float()
        return ((steps * hit_f - big * (1 - hit_f)).amax(1)
                - (steps * hit_f + big * (1 - hit_f)).amin(1))

    y_span = span(inside.any(dim=2))
    x_span = span(inside.any(dim=1))
    extent = (y_span.clamp(min=0) * x_span.clamp(min=0)).double()
    mask_size = torch.floor(torch.sqrt(extent))
    k1 = torch.clamp(torch.floor(mask_size / 10), min=10)
    k2 = torch.clamp(torch.floor(mask_size / 20), min=5)
    # erosion by a k1 x k1 box anchored at k1 // 2 (offsets lo..hi): a box lies in the convex
    # region iff its corners do, and along u (and v) the extreme corners are known per face
    lo = -torch.floor(k1 / 2).float()
    hi = (k1 - 1).float() + lo
    lin = matrix_2x3[:, :, :2].float()  # d(u, v) / d(x, y)
    reach_min = (torch.minimum(lin[:, :, 0] * lo[:, None], lin[:, :, 0] * hi[:, None])
                 + torch.minimum(lin[:, :, 1] * lo[:, None], lin[:, :, 1] * hi[:, None]))
    reach_max = (torch.maximum(lin[:, :, 0] * lo[:, None], lin[:, :, 0] * hi[:, None])
                 + torch.maximum(lin[:, :, 1] * lo[:, None], lin[:, :, 1] * hi[:, None]))
    # the box's corner nearest 0 and the one farthest from it, for u and v at once
    eroded = ((uv + reach_min[:, :, None, None] > lo_edge)
              & (uv + reach_max[:, :, None, None] < hi_edge)).all(dim=1)
    max_k2 = max(5, win // 20 + 1)
    taps = gaussian_weights(2 * k2 + 1, 2 * max_k2 + 1)  # (N, K)
    # the 0/255 mask blurred, / 255, zero for padding slots: the 0/1 mask blurred with the
    # vertical taps scaled by face_valid
    alpha = separable_blur(eroded.float(), taps, scale=face_valid.float())
    return blend_windows_(frames_bhwc_u8, frame_index, origin,
                          fake.permute(0, 2, 3, 1), alpha[..., None],
                          hands_bhw_u8=hands_bhw_u8, keep=keep)


def crop_grid_planes(matrix_2x3: torch.Tensor, window_px: int,
                     origin_xy_px: torch.Tensor) -> torch.Tensor:
    """(N, 2, win, win) float32 crop px (u, v planes) read by each pixel of each face's window:
    ``affine_grid_px(matrix_2x3, win, win, origin).permute(0, 3, 1, 2)``, the same 1/32 px
    fixed-point values, with the per-pixel work in float32 instead of float64.

    OpenCV's position is floor((X + Y) / 32) / 32 with X = round(1024 m0 x) per column and
    Y = round(1024 (m1 y + m2)) + 16 per row, integers. Moving a multiple of 32 from X to Y
    (X's value at the window's first column) leaves the floor unchanged and keeps both terms
    below 2^24 / 1024 px (exact in float32) while |d(u, v) / d(x, y)| < 2^24 / (1024 win)
    (25 crop px a frame px for a 640 px window: a crop 5 px wide in the frame) and the crop is
    nearer than 16384 px; farther, both grids are far outside the crop."""
    m = matrix_2x3.double()
    steps = torch.arange(window_px, device=m.device, dtype=torch.float64)
    xs = steps + origin_xy_px[:, 0, None].double()  # (N, win)
    ys = steps + origin_xy_px[:, 1, None].double()
    x_term = torch.round(m[:, :, 0, None] * xs[:, None, :] * 1024.0)  # (N, 2, win)
    y_term = torch.round((m[:, :, 1, None] * ys[:, None, :] + m[:, :, 2, None]) * 1024.0)
    moved = torch.round(x_term[:, :, :1] / 32.0) * 32.0
    cols = ((x_term - moved) / 32.0).float()
    rows = ((y_term + (moved + 16.0)) / 32.0).float()
    return torch.floor(rows[:, :, :, None] + cols[:, :, None, :]) / 32.0


def sample_crop_zero_border(crops_nhwc: torch.Tensor, uv_n2hw: torch.Tensor) -> torch.Tensor:
    """(N, C, h, w) float32: bilinear samples of ``crops_nhwc`` (N, s, s, C) integer-valued
    0..255 at crop px ``uv_n2hw`` (N, 2, h, w), multiples of 1/32, zero outside, rounded: the
    values of :func:`~livecam.gpupipe.swap.warp.sample_bilinear_hwc` (``border="constant"``,
    ``round_uint8=True``) in one ``grid_sample`` kernel instead of ~25 (N, h, w, 4) ones.

    Exact, not close: the crop is zero-padded to 2^k + 1 px, so ``align_corners=True`` maps
    u to u / 2^(k-1) - 1 and back without rounding, and with weights on a 1/32 grid and
    integer values below 256 every product and sum is exact in float32, in any order.

    ``torch.grid_sampler_2d`` rather than ``F.grid_sample``: on CUDA the latter takes cuDNN's
    sampler, which has no fake-tensor kernel, so torch could not save the compiled paste-back
    whole ("Operator does not support running with fake tensors" on the H200)."""
    size = crops_nhwc.shape[1]
    side = (1 << (size - 2).bit_length()) + 1  # 2^k + 1 >= size
    padded = F.pad(crops_nhwc.float().permute(0, 3, 1, 2), (0, side - size, 0, side - size))
    minus_one = torch.full((), -1.0, device=uv_n2hw.device)
    grid = torch.add(minus_one, uv_n2hw, alpha=2.0 / (side - 1))  # exact: a power of two
    out = torch.grid_sampler_2d(padded, grid.permute(0, 2, 3, 1), 0, 0, True)  # bilinear, zeros
    return torch.round(out)


def blend_windows_(frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
                   origin: torch.Tensor, faces_nwwc: torch.Tensor,
                   alpha_nww1: torch.Tensor, *,
                   hands_bhw_u8: torch.Tensor | None = None,
                   keep: KeepLoops | None = None) -> torch.Tensor:
    """Blend each face's (win, win, 3) window into its frame in place: ``alpha * face + (1 -
    alpha) * frame`` at ``origin`` (N, 2) x, y of frame ``frame_index`` (N,), truncated to
    uint8 like insightface's ``astype``. Returns ``frames_bhwc_u8``. ``faces_nwwc`` may be a
    strided view (a permuted (N, 3, win, win) one costs no copy).

    ``hands_bhw_u8`` (B, H, W) uint8, 255 on a hand in front of the face (the soft region of
    :func:`livecam.swap.occlusion.hand_alpha` times 255, rounded): alpha is scaled by ``1 -
    hand``, so the frame's own pixels stay there. Algebraically that is the CPU path's
    ``hand * captured + (1 - hand) * swapped`` (``keep_in_front`` after the paste) for one
    face; where two blends overlap at the hand's soft edge the order differs slightly.

    ``keep`` (:class:`~livecam.gpupipe.swap.keep.KeepLoops`, N rows): each face's own eyes and
    mouth drawn on its window (:func:`~livecam.gpupipe.swap.keep.kept_alpha`) scale alpha by one
    minus them, as the CPU path keeps the streamer's there, and its outline
    (:func:`~livecam.gpupipe.swap.keep.oval_alpha`) by what lies inside it."""
    n, win = int(faces_nwwc.shape[0]), int(faces_nwwc.shape[1])
    steps = torch.arange(win, device=frames_bhwc_u8.device)
    rows = (origin[:, 1, None] + steps)[:, :, None]  # (N, win, 1) frame rows
    cols = (origin[:, 0, None] + steps)[:, None, :]  # (N, 1, win)
    frame = frame_index.long()[:, None, None]  # (N, 1, 1)
    alpha = alpha_nww1[..., 0]
    if keep is not None:
        alpha = alpha * (1.0 - kept_alpha(keep, origin, win)) * oval_alpha(keep, origin, win)
    if hands_bhw_u8 is not None:  # hands are read, never written: all faces at once
        hands = hands_bhw_u8[frame, rows, cols].float()  # (N, win, win)
        alpha = alpha * (1.0 - hands * (1.0 / 255.0))
    # the face's half of the blend does not depend on the frame: all faces at once
    face_part = alpha[..., None] * faces_nwwc
    frame_weight = (1.0 - alpha)[..., None]
    for i in range(n):
        window = (frame[i], rows[i], cols[i])  # broadcast indices: no (win, win) index tensor
        merged = face_part[i] + frame_weight[i] * frames_bhwc_u8[window]
        frames_bhwc_u8.index_put_(window, merged.clamp(0.0, 255.0).to(torch.uint8))  # truncates
    return frames_bhwc_u8


def footprint_px(kps_n52: np.ndarray, template_5x2: np.ndarray, size_px: int) -> np.ndarray:
    """(N,) float64: the side of the smallest paste window that holds each face, on the host
    from its keypoints (N, 5, 2) px: :func:`mask_fits_window`'s span for the least-squares
    similarity onto ``template_5x2`` (:func:`~livecam.gpupipe.swap.align.similarity_lstsq`'s),
    whose linear part [[a, -b], [b, a]] inverts to rows of absolute sum (|a| + |b|) /
    (a^2 + b^2). The device's own check stays the one that decides (float32 there).

    In Python floats: the hub's launching thread runs it every tick, and numpy's casts and
    axis reductions would each let go of the GIL (see ``livecam.analysis.keepgil``)."""
    tpl = template_5x2.tolist()
    tx, ty = sum(p[0] for p in tpl) / len(tpl), sum(p[1] for p in tpl) / len(tpl)
    dst = [(x - tx, y - ty) for x, y in tpl]
    out = []
    for face in kps_n52.tolist():
        mx, my = sum(p[0] for p in face) / len(face), sum(p[1] for p in face) / len(face)
        var = a = b = 0.0
        for (x, y), (u, v) in zip(face, dst, strict=True):
            x, y = x - mx, y - my
            var += x * x + y * y
            a += x * u + y * v
            b += x * v - y * u
        var = max(var, 1e-12)
        a, b = a / var, b / var
        out.append((abs(a) + abs(b)) / max(a * a + b * b, 1e-24) * size_px + 2.0)
    return np.array(out, np.float64)


def window_for(footprints_px: np.ndarray, windows_px: tuple[int, ...], frame_hw: tuple[int, int],
               margin_px: float = 2.0) -> int:
    """The smallest of ``windows_px`` (ascending) whose window in a frame of ``frame_hw``
    (a window is cut to the frame's smaller side) holds every footprint with ``margin_px`` to
    spare (the host's float64 estimate against the device's float32 check); the largest when
    none does (its faces do not fit and are covered, as with one window)."""
    need = float(footprints_px.max()) + margin_px if len(footprints_px) else 0.0
    side = min(frame_hw)
    for window in windows_px:
        if need <= min(window, side):
            return window
    return windows_px[-1]


def mask_fits_window(matrix_2x3: torch.Tensor, size_px: int, window_px: int) -> torch.Tensor:
    """(N,) bool: the crop's footprint in the frame fits in a ``window_px`` square, so the GPU
    paste-back equals the CPU one for that face (it is cut at the window otherwise)."""
    from livecam.gpupipe.swap.warp import invert_affine

    inv = invert_affine(matrix_2x3.double()).float()
    lin = inv[:, :, :2].abs()
    span = lin.sum(dim=-1) * float(size_px)  # (N, 2): bbox width/height of the rotated square
    return (span.amax(dim=-1) + 2.0) <= float(window_px)

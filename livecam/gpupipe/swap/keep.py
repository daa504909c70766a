"""The streamer's kept eyes and mouth, and the face's outline, drawn on the device inside each
face's paste window.

The CPU path keeps the streamer's own eyes and mouth interior (``advanced.swap.keep_eyes``,
``swap.keep_mouth``): the mesh's eye loops and the inner mouth loop are filled with OpenCV's
anti-aliased ``fillPoly`` and Gaussian-blurred by ``KEPT_EDGE_FRACTION`` x the face's width
(:func:`livecam.swap.features.region_alpha`), and the paste-back's alpha is scaled by one minus
that. Here the same regions are drawn on the GPU, on each face's paste window, with static
shapes (so the paste-back stays inside the pipeline's CUDA graph) and from a few hundred bytes
per face: the host sends the loops (:func:`loop_rows_batch`), not a mask. Drawing the mask on the
host would cost each 1080p frame about 1 ms of Python on the stream's thread and a plane upload
on the hub's launching thread, which takes 8 streams below 30 fps on the H200. The face's
outline (the mesh's face oval) is filled the same way: the paste-back stays inside it
(:func:`oval_alpha`, :data:`livecam.swap.features.OVAL_EDGE_FRACTION`).

How a loop is filled: along each of ``SUBROWS`` sample rows per pixel row, every loop edge that
crosses the row adds its winding sign to the pixels left of the crossing, and the pixel the
crossing falls in gets the covered fraction, so each sample row holds the exact horizontal
coverage; the sample rows are averaged (vertical anti-aliasing). Each loop's winding is made
positive first (the two eyes run opposite ways), so disjoint loops add up to their union. The
soft edge is a separable Gaussian with OpenCV's kernel size for a float image.
"""

from __future__ import annotations

import array
import functools
import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from livecam.swap.features import (
    EYE_LEFT_LOOP,
    EYE_RIGHT_LOOP,
    FACE_OVAL_LOOP,
    KEPT_EDGE_FRACTION,
    MOUTH_INNER_LOOP,
    OVAL_EDGE_FRACTION,
)

#: Loops per face (right eye, left eye, inner mouth: kept; then the face's outline, which the
#: paste-back stays inside) and points per loop (the longest; shorter loops repeat their last
#: point, which adds an edge of length zero).
LOOPS = 4
KEPT_LOOPS = 3
POINTS = max(len(EYE_RIGHT_LOOP), len(EYE_LEFT_LOOP), len(MOUTH_INNER_LOOP),
             len(FACE_OVAL_LOOP))
#: OpenCV's anti-aliased fill covers about half a pixel beyond the polygon (measured on
#: the eye and mouth loops: 10 % more than their area); the loops grow by as much.
GROW_PX = 0.5
#: Sample rows per pixel row (vertical anti-aliasing).
SUBROWS = 4

class KeepLoops(NamedTuple):
    """The kept regions and outlines of N faces on the device: ``xy`` (N, LOOPS, POINTS, 2)
    float32 frame px (a kept loop whose points are all equal keeps nothing; an outline whose
    points are all equal leaves the paste-back's square as it is), ``soft_px`` (N,) float32:
    the Gaussian sigma of the kept regions' soft edge."""

    xy: torch.Tensor
    soft_px: torch.Tensor


def _padded(loop: tuple[int, ...]) -> list[int]:
    return list(loop) + [loop[-1]] * (POINTS - len(loop))


#: Mesh indices of each row's points: right eye, left eye, inner mouth, the face's outline, the
#: shorter loops repeating their last point (an edge of length zero).
_ROW_INDEX = (_padded(EYE_RIGHT_LOOP), _padded(EYE_LEFT_LOOP), _padded(MOUTH_INNER_LOOP),
              _padded(FACE_OVAL_LOOP))
_MOUTH_POINTS = len(MOUTH_INNER_LOOP)
#: The rows' numbers in a face's flattened (K * 2) mesh, x then y of each point in row order.
_ROW_NUMBERS = tuple(2 * i + c for row in _ROW_INDEX for i in row for c in (0, 1))


@functools.lru_cache(maxsize=64)
def _picker(faces: int, face_size: int) -> Callable[[Any], tuple[float, ...]]:
    """The rows' numbers of ``faces`` flattened meshes of ``face_size`` numbers each, as a
    tuple, in one call."""
    numbers = [f * face_size + k for f in range(faces) for k in _ROW_NUMBERS]
    return operator.itemgetter(*numbers) if numbers else lambda values: ()


def loop_rows_batch(landmarks_xy: npt.NDArray[np.floating], *, eyes: bool, mouth: bool,
                    mouth_size: float = 1.0
                    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """N faces' loops (N, LOOPS, POINTS, 2) float32 and soft edges (N,) float32 from
    their meshes (N, 468+, 2): the loops of :func:`livecam.swap.features.kept_loops` (the
    mouth scaled by ``mouth_size`` about its centre) and the face's outline, each face's soft
    edge ``KEPT_EDGE_FRACTION`` x its mesh's width. A loop with a point that is not finite is
    all zeros: a kept one keeps nothing (the swap shows there, never the streamer's face by
    accident), an outline leaves insightface's square; a loop not kept (``eyes``, ``mouth``)
    is all zeros.

    The swap stage runs it for every frame, so it keeps the GIL (see
    :mod:`livecam.analysis.keepgil`): the rows are gathered through a memoryview of the
    meshes into an ``array.array`` (a fancy index would let numpy go of it), the mouth's centre
    is its points' running sum (the sum's own order), and every array operation is on all
    faces at once (a Python loop per face and loop cost the stream's thread about 0.14 ms a
    frame on the H200's host), each on at most 500 numbers (288 a face; 0.04 ms a frame with
    one face, 0.11 with four, on the loaded 2-core development machine; 0.03 and 0.07 before
    the outline).
    """
    xy = np.ascontiguousarray(landmarks_xy, np.float32)
    n = len(xy)
    # the meshes' float32 numbers read through a memoryview, as Python floats
    picked = array.array("f", _picker(n, xy[0].size if n else 0)(xy.reshape(-1).data))
    rows = np.frombuffer(picked, np.float32).reshape(n, LOOPS, POINTS, 2)
    inner = rows[:, 2]
    with np.errstate(invalid="ignore", over="ignore"):  # such a loop is dropped just below
        centre = np.add.accumulate(inner[:, :_MOUTH_POINTS], axis=1)[:, -1:]
        np.divide(centre, np.float32(_MOUTH_POINTS), out=centre)
        np.subtract(inner, centre, out=inner)
        np.multiply(inner, np.float32(mouth_size), out=inner)
        np.add(centre, inner, out=inner)
    wanted = (eyes, eyes, mouth, True)
    flat = rows.reshape(n * LOOPS, POINTS * 2)
    # face by face: a ufunc over more than 500 numbers lets go of the GIL (4 faces are 1,152)
    finite = [row for face in rows for row in np.isfinite(face.reshape(LOOPS, -1)).tolist()]
    for k, row in enumerate(finite):
        if not (wanted[k % LOOPS] and all(row)):
            flat[k].fill(0.0)
    return rows, np.array([_soft_px(face) for face in xy], np.float32)


def _soft_px(face_xy: np.ndarray) -> float:
    """The soft edge of one face (K, 2): ``KEPT_EDGE_FRACTION`` x its finite points' width
    (float32, as the mesh), 0 without any."""
    xs = face_xy[:, 0]
    width = np.maximum.reduce(xs) - np.minimum.reduce(xs)
    if not math.isfinite(width):  # a point that is not finite: the width of the others
        finite = xs[np.isfinite(xs)]
        if not len(finite):
            return 0.0
        width = finite.max() - finite.min()
    return KEPT_EDGE_FRACTION * float(width)


def max_ksize(window_px: int, fraction: float = KEPT_EDGE_FRACTION) -> int:
    """The Gaussian's largest kernel on a ``window_px`` window: a face wider than its window is
    never pasted, so sigma <= ``fraction`` (of the face's width) x ``window_px``."""
    return _opencv_ksize(fraction * window_px)


def _opencv_ksize(sigma: float) -> int:
    """``cv2.GaussianBlur(float image, (0, 0), sigma)``'s kernel size: round(8 sigma + 1) | 1."""
    return int(np.floor(sigma * 8.0 + 1.5)) | 1


def coverage(xy: torch.Tensor, origin: torch.Tensor, window_px: int) -> torch.Tensor:
    """(N, win, win) float32 in [0, 1]: how much of each pixel of each face's window (top-left
    ``origin`` (N, 2) x, y in frame px) the loops ``xy`` (N, L, P, 2) cover."""
    n, loops, points, _ = xy.shape
    win = window_px
    a = xy.float() - origin.float()[:, None, None, :]  # window px
    b = torch.roll(a, -1, dims=2)  # edge k runs a[k] -> a[k + 1], the last closes the loop
    twice_area = (a[..., 0] * b[..., 1] - b[..., 0] * a[..., 1]).sum(dim=2)  # (N, L)
    positive = torch.where(twice_area < 0, -1.0, 1.0)[:, :, None]
    a = _grown(a, b, positive)
    b = torch.roll(a, -1, dims=2)
    orient = positive.expand(n, loops, points)
    a, b = a.reshape(n, 1, -1, 2), b.reshape(n, 1, -1, 2)
    orient = orient.reshape(n, 1, -1)
    # sample rows: pixel row r spans [r - 0.5, r + 0.5]
    y = ((torch.arange(win * SUBROWS, device=xy.device, dtype=torch.float32) + 0.5)
         / SUBROWS - 0.5)[None, :, None]
    ay, by = a[..., 1], b[..., 1]
    crosses = (ay <= y) != (by <= y)  # (N, R, E)
    dy = torch.where(by == ay, torch.ones_like(by), by - ay)
    x = a[..., 0] + (y - ay) / dy * (b[..., 0] - a[..., 0])
    sign = torch.where(by > ay, 1.0, -1.0) * orient * crosses.float()
    # pixel c spans [c - 0.5, c + 0.5]: an edge at x covers pixels left of floor(x + 0.5)
    # fully and that pixel by frac(x + 0.5)
    t = x + 0.5
    j = torch.floor(t)
    frac = t - j
    trash = win + 1
    step_at = torch.where(j < 0, trash, j.clamp(max=win)).long()
    frac_at = torch.where((j < 0) | (j >= win), trash, j).long()
    rows = y.shape[1]
    step = torch.zeros(n, rows, win + 2, device=xy.device).scatter_add_(2, step_at, sign)
    part = torch.zeros(n, rows, win + 2, device=xy.device).scatter_add_(2, frac_at,
                                                                       sign * frac)
    # pixels left of a crossing: the steps at indices > c, all minus those up to c (sums of
    # +-1, exact in float32)
    upto = step[..., :win + 1].cumsum(-1)
    left = upto[..., win:] - upto[..., :win]
    cover = (left + part[..., :win]).clamp(0.0, 1.0)
    return cover.reshape(n, win, SUBROWS, win).mean(dim=2)


def _grown(a: torch.Tensor, b: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Loop points ``a`` (N, L, P, 2) moved out by ``GROW_PX`` along their corners' miter
    (``b``: the next points; ``positive`` (N, L, 1) +-1 the loops' orientation)."""
    d = b - a
    d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-6)  # zero for a repeated point
    out = torch.stack((d[..., 1], -d[..., 0]), dim=-1) * positive[..., None]  # edge normals
    prev = torch.roll(out, 1, dims=2)  # the normal of the edge into each point
    both = out + prev
    denom = (1.0 + (out * prev).sum(-1, keepdim=True)).clamp(min=0.25)
    return a + GROW_PX * both / denom


def gaussian_taps(sigma: torch.Tensor, ksize_max: int) -> torch.Tensor:
    """(N, ksize_max) float32 normalised Gaussian taps of per-face ``sigma`` (N,), each cut at
    OpenCV's kernel size for that sigma (a float image), zero-padded and centred."""
    half = ksize_max // 2
    x = torch.arange(-half, half + 1, device=sigma.device, dtype=torch.float32)[None, :]
    s = sigma.float().clamp(min=1e-3)[:, None]
    radius = torch.floor(torch.floor(s * 8.0 + 1.5) / 2.0)  # (ksize - 1) / 2, ksize odd
    w = torch.exp(-(x * x) / (2.0 * s * s)) * (x.abs() <= radius).float()
    return w / w.sum(dim=1, keepdim=True)


def kept_alpha(keep: KeepLoops, origin: torch.Tensor, window_px: int) -> torch.Tensor:
    """(N, win, win) float32: the kept regions' soft alpha on each face's paste window (the
    paste-back's alpha is scaled by one minus it)."""
    cover = coverage(keep.xy[:, :KEPT_LOOPS], origin, window_px)
    taps = gaussian_taps(keep.soft_px.clamp(max=KEPT_EDGE_FRACTION * window_px),
                         max_ksize(window_px))
    return separable_blur(cover, taps)


def oval_alpha(keep: KeepLoops, origin: torch.Tensor, window_px: int) -> torch.Tensor:
    """(N, win, win) float32: the share of the paste-back inside each face's outline on its
    window (the paste-back's alpha is scaled by it): :func:`livecam.swap.features.oval_alpha`
    on the device, the outline filled, blurred by ``OVAL_EDGE_FRACTION`` x its width and
    stretched to 0 on the outline; 1 everywhere for a face without an outline."""
    oval = keep.xy[:, KEPT_LOOPS:]  # (N, 1, POINTS, 2)
    xs = oval[:, 0, :, 0]
    sigma = (OVAL_EDGE_FRACTION * (xs.amax(dim=1) - xs.amin(dim=1))).clamp(
        max=OVAL_EDGE_FRACTION * window_px)
    taps = gaussian_taps(sigma, max_ksize(window_px, OVAL_EDGE_FRACTION))
    inside = separable_blur(coverage(oval, origin, window_px), taps)
    alpha = (inside * 2.0 - 1.0).clamp(0.0, 1.0)
    none = (oval == oval[:, :, :1]).flatten(1).all(dim=1)  # (N,): no outline sent
    return torch.where(none[:, None, None], 1.0, alpha)


def separable_blur(images_nhw: torch.Tensor, taps_nk: torch.Tensor, *,
                   scale: torch.Tensor | None = None) -> torch.Tensor:
    """(N, h, h) float32: each square alpha image (values 0..1) blurred by its own symmetric
    normalised taps (N, K), K odd, along both axes with a zero border (``F.conv2d`` with
    padding K // 2), times ``scale`` (N,) 0..1 if given; values within 2^-20 of 1 are set to 1.

    Two batched products with the banded (Toeplitz) matrix T[y, y'] = taps[y' - y + K // 2]:
    ``T @ image @ T`` (T is symmetric). The grouped depthwise convolution with per-face taps
    was the paste-back's costliest kernel on the H200; GEMMs do far more multiply-adds per
    second, most of T being zero notwithstanding. The sums run in another order than the
    convolution's (about 1e-7 relative apart). Where the exact result is 1 (inside a region)
    that rounding mostly lands just below 1, and a blend truncated to uint8 turns 0.99999994
    into one grey level less: hence the snap, exact there. TF32 must stay off (the default).
    """
    n, side = images_nhw.shape[0], images_nhw.shape[-1]
    k = taps_nk.shape[1]
    steps = torch.arange(side, device=images_nhw.device)
    offset = steps[None, :] - steps[:, None] + k // 2  # (h, h) tap index, out of band: k
    offset = torch.where((offset >= 0) & (offset < k), offset, k)
    band = torch.cat((taps_nk.float(), taps_nk.new_zeros(n, 1, dtype=torch.float32)), dim=1)
    toeplitz = band[:, offset]  # (N, h, h)
    left = toeplitz if scale is None else toeplitz * scale.float()[:, None, None]
    blurred = torch.bmm(torch.bmm(left, images_nhw.float()), toeplitz)
    return torch.where(blurred > 1.0 - 2.0 ** -20, 1.0, blurred)

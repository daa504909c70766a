"""Colour transfer: make the warped source face look lit like the target face.

Methods, chosen by ``advanced.swap.colour``:

- ``lab`` (default): the target's low-frequency colour in Lab, *added* to the source's (so the
  source's detail keeps its own contrast: a multiplicative gain doubles a highlight where the
  live face is twice as bright, which blew pale live faces to cyan-white). Two scales: deep
  inside the face the blur is ``advanced.swap.colour_blur`` (the source's own look survives), near
  the mask's outer edge it is a tenth of the face width, so the swapped face meets the live face at
  the seam with the live face's own local brightness (no band where the mask stops).
- ``lowfreq``: a per-pixel, per-channel gain ``blur(target) / blur(source)`` computed
  under the face mask. Shading is multiplicative and low-frequency, so this moves the target's
  light (including side light and its colour cast) onto the source and *removes* the source's
  own uneven light, while the source's fine detail (what makes it that person) stays. The blur
  radius trades how local the light follows (smaller) against how much of the target's own
  low-frequency look (beard shadow, skin tone blotches) leaks in (smaller too).
- ``meanstd``: one mean/std match per channel in Lab (Reinhard). Cheap and robust, but a face
  half in shadow stays half in shadow.
- ``none``: the source as photographed.

Computed on the coarse grid of the warp (a few thousand points), so its cost hardly depends on
the face size. Pure functions; any thread.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

_MIN_GAIN, _MAX_GAIN = 0.25, 4.0
# Limits of the lab transfer's per-channel detail scale (L, a, b): the source's lightness detail
# (its features) is kept within +-25 %, its colour detail may shrink a lot on a pale live face.
_SCALE_MIN = np.array([0.8, 0.1, 0.1], np.float32)
_SCALE_MAX = np.array([1.25, 1.25, 1.25], np.float32)
# relighting: the most (8-bit Lab L units, 255 = white) the live face's shading may move the
# source's lightness from the broad match, either way
_RELIGHT_MAX_L = 40.0
# skin_weight: how far (in robust spreads) from the face's typical colour a pixel stops being
# skin, the spreads' floor (8-bit Lab units) and the axes' weights (L, a, b)
_SKIN_FAR = 3.5
_SKIN_SPREAD_FLOOR = np.array([8.0, 3.0, 3.0], np.float32)
_SKIN_AXIS_WEIGHT = np.array([0.5, 1.0, 1.0], np.float32)


def _weighted_blur(image: FloatArray, weight: FloatArray, ksize: int) -> FloatArray:
    """Blur of ``image * weight`` (two box passes, about a Gaussian)."""
    size = (ksize | 1, ksize | 1)
    num = cv2.blur(image * weight[:, :, None], size, borderType=cv2.BORDER_REPLICATE)
    return np.asarray(cv2.blur(num, size, borderType=cv2.BORDER_REPLICATE), np.float32)


def lowfreq_gain(source_bgr: ImageBGR, target_bgr: ImageBGR, weight: FloatArray,
                 blur_px: float) -> FloatArray:
    """(h, w, 3) float32 gain so that ``source * gain`` has the target's low-frequency light.

    ``source_bgr`` and ``target_bgr`` are (h, w, 3) uint8 on the same grid (the warped source
    and the frame under it); ``weight`` (h, w) float32 is 1 on skin both share (0 on the mouth
    interior, eyes and background); ``blur_px`` is the blur size on that grid.
    Gains are clipped to [0.25, 4] so a black pixel or a specular highlight cannot explode.
    """
    k = max(3, round(blur_px))
    # both blurs share the weight, so its normalisation cancels in the ratio; where no
    # weight reaches (far outside the face) the ratio falls back to eps/eps = 1
    eps = 1e-3
    src = _weighted_blur(source_bgr.astype(np.float32) + 1.0, weight, k) + eps
    tgt = _weighted_blur(target_bgr.astype(np.float32) + 1.0, weight, k) + eps
    gain = tgt / src
    np.clip(gain, _MIN_GAIN, _MAX_GAIN, out=gain)
    return gain


def meanstd_transfer(source_bgr: ImageBGR, target_bgr: ImageBGR, weight: FloatArray,
                     ) -> tuple[FloatArray, FloatArray]:
    """Per-channel (scale, offset) in Lab matching the source's mean/std to the target's.

    Statistics use the pixels where ``weight`` > 0.5. Apply with :func:`apply_lab_affine`.
    """
    sel = weight > 0.5
    if int(sel.sum()) < 16:
        return np.ones(3, np.float32), np.zeros(3, np.float32)
    src = cv2.cvtColor(source_bgr, cv2.COLOR_BGR2LAB)[sel].astype(np.float32)
    tgt = cv2.cvtColor(target_bgr, cv2.COLOR_BGR2LAB)[sel].astype(np.float32)
    scale = (tgt.std(axis=0) + 1.0) / (src.std(axis=0) + 1.0)
    np.clip(scale, 0.5, 2.0, out=scale)
    offset = tgt.mean(axis=0) - src.mean(axis=0) * scale
    return scale.astype(np.float32), offset.astype(np.float32)


def apply_lab_affine(image_bgr: ImageBGR, scale: FloatArray, offset: FloatArray) -> ImageBGR:
    """``image`` with each Lab channel mapped by ``v * scale + offset`` (uint8 BGR out)."""
    lab = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2LAB).astype(np.float32)
    lab = lab * scale + offset
    np.clip(lab, 0, 255, out=lab)
    return np.asarray(cv2.cvtColor(lab.astype(np.uint8), cv2.COLOR_LAB2BGR), np.uint8)


def _local_mean(image: FloatArray, weight: FloatArray, ksize: int,
                fallback: FloatArray) -> FloatArray:
    """Weighted local mean of ``image`` (h, w, c) under ``weight`` (h, w); ``fallback`` (c,)
    where no weight reaches."""
    size = (ksize | 1, ksize | 1)
    num = image * weight[:, :, None]
    den = weight
    for _ in range(2):  # two box passes: about a Gaussian
        # reshaped: OpenCV returns a one-channel image as (h, w)
        num = np.asarray(cv2.blur(num, size, borderType=cv2.BORDER_REPLICATE),
                         np.float32).reshape(image.shape)
        den = np.asarray(cv2.blur(den, size, borderType=cv2.BORDER_REPLICATE), np.float32)
    eps = 1e-3
    return np.asarray((num + eps * fallback) / (den[:, :, None] + eps), np.float32)


def skin_weight(lab: FloatArray, weight: FloatArray) -> FloatArray:
    """``weight`` (h, w) float32 with 0 where ``lab`` (h, w, 3, 8-bit Lab) is far from the
    weighted pixels' own typical colour: hair, a beard, background inside a face mask. Robust
    (median and median absolute deviation); lightness counts half (shading varies it)."""
    sel = weight > 0.5
    if int(sel.sum()) < 16:
        return weight
    pixels = lab[sel]
    centre = np.median(pixels, axis=0)
    spread = np.maximum(np.median(np.abs(pixels - centre), axis=0) * 1.4826, _SKIN_SPREAD_FLOOR)
    d = (lab - centre) / spread * _SKIN_AXIS_WEIGHT
    far = np.sqrt((d * d).sum(axis=2)) > _SKIN_FAR
    return np.where(far, 0.0, weight).astype(np.float32)


def lab_transfer(source_lab: FloatArray, target_lab: FloatArray, weight: FloatArray, *,
                 blur_px: float, edge_blur_px: float, edge_weight: FloatArray,
                 relight_blur_px: float = 0.0) -> tuple[FloatArray, FloatArray]:
    """Per-channel ``scale`` (3,) and per-pixel ``bias`` (h, w, 3) float32 such that
    ``source * scale + bias`` has the target's low frequencies and its amount of colour detail.

    ``source_lab`` / ``target_lab`` are (h, w, 3) float32 in OpenCV's 8-bit Lab scale (L 0-255,
    a and b centred on 128) on the same grid; ``weight`` (h, w) float32 is 1 on skin both share
    (0 on kept eyes and mouth and outside the face). The local means use ``blur_px`` inside the
    face and the smaller ``edge_blur_px`` where ``edge_weight`` (h, w) in [0, 1] is 1 (near the
    mask's outer edge). ``scale`` matches the spread of each channel around its local mean (a
    saturated source on a pale live face loses the saturation it would keep as red blotches and
    cyan highlights), within limits that keep the source's own detail. Where no weight reaches,
    the means are the global ones. Each side's hair, beard or background under the mask
    (:func:`skin_weight`) is left out of its own means: the live face's hair at the mask's edge
    would otherwise darken the swapped skin there, and move with every landmark's jitter.

    ``relight_blur_px`` > 0 relights: the lightness's local means use that (smaller) blur, so
    the live face's shading (a lamp to one side, a shadowed cheek) replaces the source photo's
    own, while the colour (a, b) keeps the broad match. The shading moved is bounded
    (``_RELIGHT_MAX_L``), so a dark, noisy corner cannot pull the face black.
    """
    w_src, w_tgt = skin_weight(source_lab, weight), skin_weight(target_lab, weight)
    sel_src, sel_tgt = w_src > 0.5, w_tgt > 0.5
    if int(sel_src.sum()) < 4 or int(sel_tgt.sum()) < 4:
        return np.ones(3, np.float32), np.zeros_like(source_lab)
    g_src = source_lab[sel_src].mean(axis=0).astype(np.float32)
    g_tgt = target_lab[sel_tgt].mean(axis=0).astype(np.float32)
    means = []
    for blur in (blur_px, edge_blur_px):
        k = max(3, round(blur))
        means.append((_local_mean(source_lab, w_src, k, g_src),
                      _local_mean(target_lab, w_tgt, k, g_tgt)))
    (src_broad, tgt_broad), (src_edge, tgt_edge) = means
    spread_src = (source_lab - src_broad)[sel_src].std(axis=0)
    spread_tgt = (target_lab - tgt_broad)[sel_tgt].std(axis=0)
    scale = np.clip((spread_tgt + 1.0) / (spread_src + 1.0), _SCALE_MIN, _SCALE_MAX)
    if relight_blur_px > 0.0:
        tgt_broad = _relit_means(source_lab, target_lab, w_src, w_tgt, src_broad, tgt_broad,
                                 float(scale[0]), max(3, round(relight_blur_px)))
    w = edge_weight[:, :, None]
    src_mean = src_broad * (1.0 - w) + src_edge * w
    tgt_mean = tgt_broad * (1.0 - w) + tgt_edge * w
    bias = tgt_mean - src_mean * scale
    return scale.astype(np.float32), np.asarray(bias, np.float32)


def _relit_means(source_lab: FloatArray, target_lab: FloatArray, w_src: FloatArray,
                 w_tgt: FloatArray, src_broad: FloatArray, tgt_broad: FloatArray,
                 scale_l: float, ksize: int) -> FloatArray:
    """The target's broad local means with the shading difference at ``ksize`` added to their
    lightness (bounded to +-``_RELIGHT_MAX_L``): with them, the source's lightness takes the
    live face's local means at ``ksize`` in place of its own."""
    src_l = _local_mean(source_lab[:, :, :1], w_src, ksize, src_broad[0, 0, :1])[:, :, 0]
    tgt_l = _local_mean(target_lab[:, :, :1], w_tgt, ksize, tgt_broad[0, 0, :1])[:, :, 0]
    # the live face's shading minus the source photo's, each around its broad mean
    shading = (tgt_l - tgt_broad[:, :, 0]) - (src_l - src_broad[:, :, 0]) * scale_l
    np.clip(shading, -_RELIGHT_MAX_L, _RELIGHT_MAX_L, out=shading)
    tgt = tgt_broad.copy()
    tgt[:, :, 0] += shading
    return tgt


class ColourMemory:
    """One tracked face's colour match over time: a short exponential moving average of the
    lab transfer's ``scale`` and ``bias`` (:func:`lab_transfer`), so that sensor noise and the
    mesh's jitter, which move the statistics a little every frame, do not make the swapped
    face flicker. ``bias`` lives on the face box's coarse grid, which moves with the face in
    whole grid steps: the past bias is moved with the face (its centre and width) onto this
    frame's grid before they are averaged. Starts again for another source photo (an identity
    switch). One per track; only the pipeline thread uses it."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._scale: FloatArray | None = None
        self._bias: FloatArray | None = None
        self._grid = (0.0, 0.0, 1.0)  # x1, y1, step of the past bias's grid (frame px)
        self._anchor = (0.0, 0.0, 1.0)  # the face's centre x, y and width then (frame px)

    def smooth(self, key: str, scale: FloatArray, bias: FloatArray, new_weight: float, *,
               grid: tuple[float, float, float], anchor: tuple[float, float, float],
               ) -> tuple[FloatArray, FloatArray]:
        """``(scale, bias)`` averaged with the past ones: ``new_weight`` (0, 1] is this
        frame's share (1: no smoothing). ``key`` names the source photo; another key starts
        over. ``grid`` is (x1, y1, step) of ``bias``'s coarse grid: coarse point (i, j) sits at
        frame pixel ``(x1 + (j + 0.5) * step - 0.5, y1 + (i + 0.5) * step - 0.5)``; ``anchor``
        is the face's centre (x, y) and width in frame pixels."""
        past_scale, past_bias = self._scale, self._bias
        past_grid, past_anchor = self._grid, self._anchor
        self._grid, self._anchor = grid, anchor
        if self._key != key or past_scale is None or past_bias is None or new_weight >= 1.0:
            self._key, self._scale, self._bias = key, scale, bias
            return scale, bias
        # this grid's points -> the past grid's (coarse units), following the face
        x1, y1, step = grid
        px1, py1, pstep = past_grid
        cx, cy, width = anchor
        pcx, pcy, pwidth = past_anchor
        r = pwidth / max(width, 1e-3)
        a = step * r / pstep
        bx = (pcx + (x1 + 0.5 * step - 0.5 - cx) * r - px1 + 0.5) / pstep - 0.5
        by = (pcy + (y1 + 0.5 * step - 0.5 - cy) * r - py1 + 0.5) / pstep - 0.5
        to_past = np.array([[a, 0.0, bx], [0.0, a, by]], np.float32)
        moved = np.asarray(cv2.warpAffine(past_bias, to_past, (bias.shape[1], bias.shape[0]),
                                          flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                          borderMode=cv2.BORDER_REPLICATE),
                           np.float32).reshape(bias.shape)
        keep = 1.0 - new_weight
        out_scale = np.asarray(scale * new_weight + past_scale * keep, np.float32)
        out_bias = np.asarray(cv2.addWeighted(bias, new_weight, moved, keep, 0.0), np.float32)
        self._scale, self._bias = out_scale, out_bias
        return out_scale, out_bias


def apply_lab_transfer(image_bgr: ImageBGR, scale: FloatArray, bias: FloatArray) -> ImageBGR:
    """``image_bgr`` (h, w, 3) uint8 mapped in Lab by ``v * scale + bias`` (``scale`` (3,),
    ``bias`` (h, w, 3) float32 in 8-bit Lab units); saturates at the Lab range."""
    lab = np.asarray(cv2.cvtColor(image_bgr, cv2.COLOR_BGR2LAB), np.uint8)
    factors = (float(scale[0]), float(scale[1]), float(scale[2]), 0.0)
    multiply: Any = cv2.multiply  # the stubs lack the (array, scalar tuple) form
    scaled = multiply(lab, factors, dtype=cv2.CV_32F)
    shifted = cv2.add(scaled, bias, dtype=cv2.CV_8U)  # rounds and saturates in one pass
    return np.asarray(cv2.cvtColor(shifted, cv2.COLOR_LAB2BGR), np.uint8)

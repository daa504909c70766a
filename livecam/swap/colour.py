"""Colour transfer: make the warped source face look lit like the target face.

Two methods, chosen by ``swap.colour``:

- ``lowfreq`` (default): a per-pixel, per-channel gain ``blur(target) / blur(source)`` computed
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

import cv2
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

_MIN_GAIN, _MAX_GAIN = 0.25, 4.0


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

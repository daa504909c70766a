"""Sharpness matching: the swapped face as crisp as the live face it replaces.

The warped source is resampled (bilinear) and often enlarged from a smaller photo, so it comes
out softer than the camera's picture around it. :func:`match_sharpness` measures the fine
detail (the image minus a 1-pixel Gaussian blur, grey) of the live face and of the swapped face
under the same mask, and adds back the swapped face's own fine detail until the two match
(an unsharp mask whose amount is measured, between 0 and ``max_gain - 1``). It cannot invent
detail a small source photo never had; it restores what resampling flattened.

Pure function; any thread, on arrays the caller owns.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

ImageBGR = npt.NDArray[np.uint8]

_SIGMA_PX = 1.0  # the scale of "fine detail"
_SAMPLE_STEP = 2  # statistics on every 2nd pixel each way: same answer, a quarter of the work


def detail_energy(image_bgr: ImageBGR, mask: npt.NDArray[np.bool_]) -> float:
    """RMS of the fine detail (grey image minus its 1 px Gaussian blur) under ``mask`` (h, w)."""
    grey = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2GRAY).astype(np.float32)
    fine = grey - np.asarray(cv2.GaussianBlur(grey, (0, 0), _SIGMA_PX), np.float32)
    sel = np.compress(mask.ravel(), fine.ravel())  # fine[mask], several times quicker
    return float(np.sqrt(np.mean(sel * sel))) if sel.size else 0.0


def match_sharpness(face_bgr: ImageBGR, target_bgr: ImageBGR, mask: npt.NDArray[np.bool_], *,
                    max_gain: float = 2.5) -> tuple[ImageBGR, float]:
    """(``face_bgr`` sharpened so its fine detail under ``mask`` matches ``target_bgr``'s, the
    gain used). Both images are (h, w, 3) uint8 over the same box; ``mask`` (h, w) bool is
    where the face is shown. A face already as sharp as the target comes back unchanged."""
    s = _SAMPLE_STEP
    sub = mask[::s, ::s]
    want = detail_energy(np.ascontiguousarray(target_bgr[::s, ::s]), sub)
    have = detail_energy(np.ascontiguousarray(face_bgr[::s, ::s]), sub)
    gain = float(np.clip(want / max(have, 1e-3), 1.0, max_gain))
    if gain <= 1.02:
        return face_bgr, 1.0
    blurred = cv2.GaussianBlur(face_bgr, (0, 0), _SIGMA_PX)
    # face + (gain - 1) * (face - blurred), saturating to uint8 in one call
    out = cv2.addWeighted(face_bgr, gain, blurred, 1.0 - gain, 0.0)
    return np.asarray(out, np.uint8), gain

"""The streamer's own eyes and mouth interior inside a swapped face.

A source photo has one gaze, one pair of lids and one mouth; the streamer blinks, glances and
talks. The classic swap keeps the streamer's pixels inside the lids (iris, pupil, the white of
the eye: gaze and the last of a blink) and inside the lips (teeth, tongue, the dark of an open
mouth), while the lids and lips themselves are the source's, warped to where the streamer's
are. Where the shape transfer moved an eye or the lips (as one piece) the kept pixels are read
from the streamer's face at the unmoved place, so they fit into the moved opening exactly.

The neural swap keeps the same regions (``livecam.swap.neural``) with no shift.

Pure functions; any thread, on arrays the caller owns.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

_FIXED = 4  # sub-pixel bits for cv2.fillPoly

# Rims of the mesh's holes (MediaPipe 468-point indices, ordered loops), the same loops as
# ``MeshTopology.eye_right`` / ``eye_left`` / ``mouth_inner`` (tests/swap/test_features.py).
EYE_RIGHT_LOOP = (7, 33, 246, 161, 160, 159, 158, 157, 173, 133, 155, 154, 153, 145, 144, 163)
EYE_LEFT_LOOP = (249, 263, 466, 388, 387, 386, 385, 384, 398, 362, 382, 381, 380, 374, 373, 390)
MOUTH_INNER_LOOP = (13, 82, 81, 80, 191, 78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415,
                    310, 311, 312)


@dataclass(frozen=True)
class KeptRegion:
    """One kept region: ``loop_xy`` (K, 2) float32 frame px where it is shown, ``shift_xy``
    (2,) float32: the streamer's pixels are read at ``loop_xy + shift_xy``."""

    name: str
    loop_xy: FloatArray
    shift_xy: FloatArray


def kept_region(name: str, shown_loop_xy: FloatArray, live_loop_xy: FloatArray,
                scale: float = 1.0) -> KeptRegion:
    """A region shown at ``shown_loop_xy`` (K, 2) and read at ``live_loop_xy`` (K, 2), both
    scaled by ``scale`` about their centre (1 = the rim itself)."""
    centre = shown_loop_xy.mean(axis=0)
    loop = centre + (shown_loop_xy - centre) * np.float32(scale)
    # whole pixels: a fractional shift resamples the streamer's pixels with weights that change
    # with every frame's landmarks, which shows as a shimmer (tests/swap/test_temporal.py)
    shift = np.round(live_loop_xy.mean(axis=0) - centre)
    return KeptRegion(name, loop.astype(np.float32), shift.astype(np.float32))


def region_alpha(loop_xy: FloatArray, origin_xy: tuple[int, int], shape_hw: tuple[int, int],
                 soft_px: float) -> FloatArray:
    """(h, w) float32 in [0, 1]: 1 inside the polygon, a Gaussian edge of ``soft_px`` centred
    on its rim; ``origin_xy`` is the frame pixel of element (0, 0)."""
    mask = np.zeros(shape_hw, np.uint8)
    pts = np.round((loop_xy - np.asarray(origin_xy, np.float32)) * (1 << _FIXED)).astype(np.int32)
    cv2.fillPoly(mask, [pts], (255,), cv2.LINE_AA, _FIXED)
    alpha = mask.astype(np.float32) * np.float32(1.0 / 255.0)
    if soft_px > 0.3:
        alpha = np.asarray(cv2.GaussianBlur(alpha, (0, 0), soft_px), np.float32)
    return alpha


#: Soft edge of the kept eyes and mouth in the neural swap, as a fraction of the face's width.
KEPT_EDGE_FRACTION = 0.008

#: The face's outline (MediaPipe 468-point indices, an ordered loop), the same loop as
#: ``MeshTopology.face_oval`` (tests/swap/test_features.py).
FACE_OVAL_LOOP = (10, 109, 67, 103, 54, 21, 162, 127, 234, 93, 132, 58, 172, 136, 150, 149,
                  176, 148, 152, 377, 400, 378, 379, 365, 397, 288, 361, 323, 454, 356, 389,
                  251, 284, 332, 297, 338)
#: The neural swap's paste-back stays inside the face's outline: insightface pastes its whole
#: aligned square, so an occluder inside the square (a board over part of the face, something
#: in front of the jaw) was repainted by the generator (a *ghost*: 32 frames on the leak clip
#: ``half_hidden`` on the GPU path). The outline's soft edge, as a fraction of the face's
#: width; it lies inside the outline (:func:`oval_alpha`).
OVAL_EDGE_FRACTION = 0.02


def oval_alpha(oval_xy: npt.ArrayLike | None, origin_xy: tuple[int, int],
               shape_hw: tuple[int, int]) -> FloatArray | None:
    """(h, w) float32 in [0, 1]: the paste-back's share inside the face's outline ``oval_xy``
    (36, 2) frame px: the outline filled and blurred by ``OVAL_EDGE_FRACTION`` x its width
    (:func:`region_alpha`), then stretched so that it is 0 on the outline and beyond, 1 well
    inside (``clip(2 a - 1, 0, 1)``): nothing of the swap reaches past the face's outline.
    Within 2^-19 of 1 it is 1: the blur's rounding would otherwise cost the pasted face one
    grey level (a blend truncated to uint8), as on the device (``separable_blur``). None
    without an outline or with a point that is not finite: the paste-back keeps its square."""
    if oval_xy is None:
        return None
    oval = np.asarray(oval_xy, np.float32)
    if not np.isfinite(oval).all():
        return None
    soft_px = OVAL_EDGE_FRACTION * float(np.ptp(oval[:, 0]))
    alpha = region_alpha(oval, origin_xy, shape_hw, soft_px)
    alpha = np.clip(alpha * np.float32(2.0) - np.float32(1.0), 0.0, 1.0)
    alpha[alpha > np.float32(1.0 - 2.0 ** -19)] = 1.0
    return alpha


def kept_loops(landmarks_xy: FloatArray, *, eyes: bool, mouth: bool,
               mouth_size: float = 1.0) -> list[FloatArray]:
    """The streamer's regions the neural swap keeps for one face's mesh (468+, 2): both eye
    loops and the inner mouth loop scaled by ``mouth_size`` about its centre."""
    loops = []
    if eyes:
        loops += [landmarks_xy[list(EYE_RIGHT_LOOP)], landmarks_xy[list(EYE_LEFT_LOOP)]]
    if mouth:
        inner = landmarks_xy[list(MOUTH_INNER_LOOP)]
        centre = inner.mean(axis=0)
        loops.append(centre + (inner - centre) * mouth_size)
    return loops


def keep_streamer(face_bgr: ImageBGR, target_bgr: ImageBGR, box_xyxy: tuple[int, int, int, int],
                  regions: list[KeptRegion], *, soft_px: float) -> ImageBGR:
    """Write the streamer's pixels into ``face_bgr`` (the swapped face over ``box_xyxy``, (h, w,
    3) uint8, modified in place and returned) inside each region, read from the frame
    ``target_bgr`` at the region's shift, with a soft edge of ``soft_px``."""
    bx1, by1, bx2, by2 = box_xyxy
    margin = int(np.ceil(3 * soft_px)) + 1
    for region in regions:
        lo = np.floor(region.loop_xy.min(axis=0)).astype(int) - margin
        hi = np.ceil(region.loop_xy.max(axis=0)).astype(int) + margin + 1
        x1, y1 = max(int(lo[0]), bx1), max(int(lo[1]), by1)
        x2, y2 = min(int(hi[0]), bx2), min(int(hi[1]), by2)
        if x2 - x1 < 2 or y2 - y1 < 2:
            continue
        alpha = region_alpha(region.loop_xy, (x1, y1), (y2 - y1, x2 - x1), soft_px)
        sx, sy = float(region.shift_xy[0]), float(region.shift_xy[1])
        # frame pixel (x, y) of the patch reads the streamer at (x + sx, y + sy)
        matrix = np.array([[1.0, 0.0, x1 + sx], [0.0, 1.0, y1 + sy]], np.float64)
        streamer = cv2.warpAffine(target_bgr, matrix, (x2 - x1, y2 - y1),
                                  flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                  borderMode=cv2.BORDER_REPLICATE)
        patch = face_bgr[y1 - by1:y2 - by1, x1 - bx1:x2 - bx1]
        patch[...] = cv2.blendLinear(np.ascontiguousarray(streamer), np.ascontiguousarray(patch),
                                     alpha, 1.0 - alpha)
    return face_bgr

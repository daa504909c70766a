"""Named subsets of the 468/478-point MediaPipe face mesh.

Index choices (MediaPipe canonical face model, image-left = the subject's right side):
eye centres are the mean of each eye's corners and lid midpoints (not the irises, which follow
gaze and would make an alignment template swim), nose tip 1, mouth corners 61 and 291,
lip midpoints 13/14, ear tragion region 234/454.
"""

from __future__ import annotations

import numpy as np

from livecam.core.types import FloatArray

EYE_IMAGE_LEFT = (33, 133, 159, 145)
EYE_IMAGE_RIGHT = (263, 362, 386, 374)
NOSE_TIP = 1
MOUTH_IMAGE_LEFT = 61
MOUTH_IMAGE_RIGHT = 291
LIP_MIDPOINTS = (13, 14)
TRAGION_IMAGE_LEFT = 234
TRAGION_IMAGE_RIGHT = 454


def _pair(a: int, b: int) -> slice:
    """Points ``a`` and ``b`` (a < b) as one basic slice: a view of both, where indexing with
    ``[a, b]`` would copy them (letting numpy go of the GIL, see keepgil)."""
    return slice(a, b + 1, b - a)


# the image-left and image-right keypoints side by side: the eyes' points (each eye's in its
# order), the tragions (six_keypoints) and the mouth corners (five_point), each pair one
# (N, 2, 2) view
_EYE_PAIRS = tuple(_pair(a, b) for a, b in zip(EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, strict=True))
_TRAGION_PAIR = _pair(TRAGION_IMAGE_LEFT, TRAGION_IMAGE_RIGHT)
_MOUTH_PAIR = _pair(MOUTH_IMAGE_LEFT, MOUTH_IMAGE_RIGHT)
# the means' 1/n as float32 arrays (exact: 1/4, 1/2): numpy converts a Python float on each call
_EYE_SCALE = np.array([1 / len(EYE_IMAGE_LEFT)], np.float32)
_LIP_SCALE = np.array([1 / len(LIP_MIDPOINTS)], np.float32)


def _as_batch(landmarks_xy: np.ndarray) -> np.ndarray:
    arr = np.asarray(landmarks_xy, dtype=np.float32)
    if arr.ndim != 3 or arr.shape[2] != 2 or arr.shape[1] not in (468, 478):
        raise ValueError(f"landmarks_xy must be (N, 468|478, 2), got {arr.shape}")
    return arr


def five_point(landmarks_xy: np.ndarray) -> FloatArray:
    """(N, 5, 2) float32 px in insightface's ArcFace template order.

    Order (``insightface.utils.face_align.arcface_dst``): eye on the image's left, eye on the
    image's right, nose tip, mouth corner on the image's left, mouth corner on the image's right.
    Input: (N, 468|478, 2) px. Any thread. Computed as :func:`six_keypoints` is (views and
    ``out=``, keeping the GIL): the swap stage runs it for every frame.
    """
    lm = _as_batch(landmarks_xy)
    out = np.empty((len(lm), 5, 2), np.float32)
    np.multiply(_eye_sums(lm), _EYE_SCALE, out=out[:, 0:2])
    np.positive(lm[:, NOSE_TIP], out=out[:, 2])
    np.positive(lm[:, _MOUTH_PAIR], out=out[:, 3:5])
    return out


def _eye_sums(lm: np.ndarray) -> np.ndarray:
    """(N, 2, 2): each eye's points added in order (image-left eye, image-right eye)."""
    eyes = lm[:, _EYE_PAIRS[0]]
    for pair in _EYE_PAIRS[1:]:
        eyes = eyes + lm[:, pair]
    return eyes


def six_keypoints(landmarks_xy: np.ndarray) -> FloatArray:
    """(N, 6, 2) float32 px in BlazeFace keypoint order, derived from the mesh.

    Order: image-left eye, image-right eye, nose tip, mouth centre, image-left tragion,
    image-right tragion (the detector's own order, so ``Faces.keypoints_xy`` means the same
    whether it came from a detection or from tracked landmarks). Any thread.
    """
    lm = _as_batch(landmarks_xy)
    # Each keypoint from views of its points, added in the order a sum over them adds and
    # written with ``out=``: a gather (fancy index) and writes into views of the output
    # (``out[:, k] = ...``) would each let go of the GIL (see keepgil). The two eyes, and the
    # two tragions, are computed together on (N, 2, 2) views: the same operations per element
    # in fewer numpy calls. A one-point keypoint is the point (``+x`` is ``x``, bit for bit).
    out = np.empty((len(lm), 6, 2), np.float32)
    np.multiply(_eye_sums(lm), _EYE_SCALE, out=out[:, 0:2])
    np.positive(lm[:, NOSE_TIP], out=out[:, 2])
    lips = lm[:, LIP_MIDPOINTS[0]]
    for i in LIP_MIDPOINTS[1:]:
        lips = lips + lm[:, i]
    np.multiply(lips, _LIP_SCALE, out=out[:, 3])
    np.positive(lm[:, _TRAGION_PAIR], out=out[:, 4:6])
    return out

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
_FIVE_POINT_SOURCES = (*EYE_IMAGE_LEFT, *EYE_IMAGE_RIGHT, NOSE_TIP, MOUTH_IMAGE_LEFT,
                       MOUTH_IMAGE_RIGHT)
# the points each of six_keypoints' keypoints is the mean of, in BlazeFace's order
_SIX_KEYPOINT_GROUPS = (EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, (NOSE_TIP,), LIP_MIDPOINTS,
                        (TRAGION_IMAGE_LEFT,), (TRAGION_IMAGE_RIGHT,))


def _as_batch(landmarks_xy: np.ndarray) -> np.ndarray:
    arr = np.asarray(landmarks_xy, dtype=np.float32)
    if arr.ndim != 3 or arr.shape[2] != 2 or arr.shape[1] not in (468, 478):
        raise ValueError(f"landmarks_xy must be (N, 468|478, 2), got {arr.shape}")
    return arr


def five_point(landmarks_xy: np.ndarray) -> FloatArray:
    """(N, 5, 2) float32 px in insightface's ArcFace template order.

    Order (``insightface.utils.face_align.arcface_dst``): eye on the image's left, eye on the
    image's right, nose tip, mouth corner on the image's left, mouth corner on the image's right.
    Input: (N, 468|478, 2) px. Any thread.
    """
    lm = _as_batch(landmarks_xy)
    pts = lm[:, _FIVE_POINT_SOURCES]  # one gather, as six_keypoints (same bits as the means)
    out = np.empty((len(lm), 5, 2), np.float32)
    out[:, 0] = pts[:, 0:4].sum(axis=1) * 0.25
    out[:, 1] = pts[:, 4:8].sum(axis=1) * 0.25
    out[:, 2:] = pts[:, 8:]
    return out


def six_keypoints(landmarks_xy: np.ndarray) -> FloatArray:
    """(N, 6, 2) float32 px in BlazeFace keypoint order, derived from the mesh.

    Order: image-left eye, image-right eye, nose tip, mouth centre, image-left tragion,
    image-right tragion (the detector's own order, so ``Faces.keypoints_xy`` means the same
    whether it came from a detection or from tracked landmarks). Any thread.
    """
    lm = _as_batch(landmarks_xy)
    # Each keypoint from (N, 2) views of its points, added in the order a sum over them adds
    # and written with ``out=``: a gather (fancy index) and writes into views of the output
    # (``out[:, k] = ...``) would each let go of the GIL (see keepgil), seven times a frame.
    out = np.empty((len(lm), 6, 2), np.float32)
    for k, points in enumerate(_SIX_KEYPOINT_GROUPS):
        total = lm[:, points[0]]
        for i in points[1:]:
            total = total + lm[:, i]
        np.multiply(total, 1.0 / len(points), out=out[:, k])  # x * 1.0 is x, bit for bit
    return out

"""Faces cut by the frame's edge: found by the detector on mirrored edge strips, and covered.

BlazeFace rarely fires on a face cut by the frame edge (a face at the top edge showing one
eye, its nose and lips scored 0.48/0.55, under the follower's 0.6 for a face of its own; at the
left edge 0.31 or nothing). Mirrored at the edge, the cut face reads as a whole (if odd) face;
and seen in a strip along the edge rather than in the whole frame, it is 2-3 times larger in
the detector's input. Measured on the leak clip ``slide_left`` (a 180 px face entering), the
short-range detector on a 360 px strip mirrored to 720x720 scored 0.32 with 13 % of the face
in view, 0.71 at 26 %, 0.78 at 32 %; on the whole frame mirrored out by 154 px it found nothing
below 32 %, and on the plain frame nothing below 38 %.

So the follower runs the detector on :func:`edge_strips` (each edge's strip, ``depth`` deep,
cut into pieces no longer than twice that and mirrored outward: six square 720x720 pictures
for a 1280x720 frame) and takes every hit whose box crosses the frame's edge, with the weak
whole-frame hits that do, as a face to cover (``Unswappable.NO_MESH``: box only) unless a
followed face is there: a cut face is covered until enough of it is in view for its mesh to
be followed and swapped. Boxes are kept as found, partly outside the frame, so the cover's
ellipse sits on the face.

:class:`EdgeMemory` keeps a hit covered for a few frames after the detector last saw it: the
scores of cut faces are weak and flicker from frame to frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from livecam.core.types import Faces, ImageBGR

#: A strip's depth from the edge, as a share of the frame's shorter side (720p: 360 px).
DEPTH_SHARE = 0.5
#: A box counts as crossing the edge when it comes this close to it (px).
EDGE_MARGIN_PX = 2.0
#: Boxes with less than this share of their area inside the frame are left out (the mirror
#: image of a face, or a face with nothing in view).
MIN_INSIDE = 0.04
#: Frames an edge hit stays covered after it was last detected.
MEMORY_FRAMES = 8


@dataclass(frozen=True)
class EdgeStrip:
    """One piece of an edge's strip, mirrored outward: ``image_bgr`` (a new array) and where
    it lies: frame px = picture px + ``offset_xy`` (the mirrored half falls outside the frame,
    where hits are left out)."""

    image_bgr: ImageBGR
    offset_xy: np.ndarray  # (2,) float32: picture px + offset = frame px


def edge_strips(image_bgr: ImageBGR, depth_share: float = DEPTH_SHARE) -> list[EdgeStrip]:
    """Each edge's strip of ``image_bgr`` (H, W, 3), ``depth_share`` of the shorter side
    deep, in pieces at most twice as long as deep, each mirrored outward across the edge."""
    h, w = image_bgr.shape[:2]
    d = max(8, round(depth_share * min(w, h)))
    out: list[EdgeStrip] = []
    for edge in ("left", "right", "top", "bottom"):
        length = h if edge in ("left", "right") else w
        n = max(1, math.ceil(length / (2 * d)))
        piece = min(length, 2 * d)
        starts = [round(i * (length - piece) / max(1, n - 1)) for i in range(n)]
        for s in starts:
            if edge == "left":
                crop = image_bgr[s:s + piece, :d]
                pic = cv2.copyMakeBorder(crop, 0, 0, d, 0, cv2.BORDER_REFLECT_101)
                off = (-d, s)
            elif edge == "right":
                crop = image_bgr[s:s + piece, w - d:]
                pic = cv2.copyMakeBorder(crop, 0, 0, 0, d, cv2.BORDER_REFLECT_101)
                off = (w - d, s)
            elif edge == "top":
                crop = image_bgr[:d, s:s + piece]
                pic = cv2.copyMakeBorder(crop, d, 0, 0, 0, cv2.BORDER_REFLECT_101)
                off = (s, -d)
            else:
                crop = image_bgr[h - d:, s:s + piece]
                pic = cv2.copyMakeBorder(crop, 0, d, 0, 0, cv2.BORDER_REFLECT_101)
                off = (s, h - d)
            out.append(EdgeStrip(np.ascontiguousarray(pic), np.array(off, np.float32)))
    return out


def crosses_edge(box: np.ndarray, width_px: int, height_px: int) -> bool:
    """True when ``box`` (4,) reaches the frame's edge and lies at least :data:`MIN_INSIDE`
    of its area inside the frame."""
    m = EDGE_MARGIN_PX
    if not (box[0] <= m or box[1] <= m or box[2] >= width_px - m or box[3] >= height_px - m):
        return False
    area = max(float(box[2] - box[0]) * float(box[3] - box[1]), 1e-6)
    iw = max(0.0, min(float(box[2]), width_px) - max(float(box[0]), 0.0))
    ih = max(0.0, min(float(box[3]), height_px) - max(float(box[1]), 0.0))
    return iw * ih / area >= MIN_INSIDE


Hit = tuple[np.ndarray, float, np.ndarray]


def edge_hits(found: list[tuple[Faces, np.ndarray]], width_px: int, height_px: int,
              min_score: float) -> list[Hit]:
    """(box (4,), score, keypoints (6, 2)) in frame px of the detections that cross the
    frame's edge with at least ``min_score``. ``found``: (detections, offset (2,)) pairs:
    each strip's with its :attr:`EdgeStrip.offset_xy`, and this frame's own (weak ones too)
    with offset 0."""
    hits: list[Hit] = []
    for faces, by in found:
        for i in range(len(faces)):
            score = float(faces.scores[i])
            if score < min_score:
                continue
            box = (faces.boxes_xyxy[i] + np.tile(by, 2)).astype(np.float32)
            if crosses_edge(box, width_px, height_px):
                hits.append((box, score, (faces.keypoints_xy[i] + by).astype(np.float32)))
    return hits


class EdgeMemory:
    """Edge hits of the last :data:`MEMORY_FRAMES` frames: each frame's hits replace the
    remembered ones they overlap; the others stay until they are that old or a followed face
    covers them. Only the follower's thread."""

    def __init__(self, frames: int = MEMORY_FRAMES) -> None:
        self.frames = frames
        self._kept: list[tuple[np.ndarray, float, np.ndarray, int]] = []

    def update(self, hits: list[Hit], index: int, followed: list[np.ndarray]) -> list[Hit]:
        """This frame's hits plus the remembered ones no hit or ``followed`` box repeats."""
        from livecam.analysis.observations import overlaps

        now = [(b, s, k, index) for b, s, k in hits]
        boxes = [b for b, _, _ in hits] + list(followed)
        older = [e for e in self._kept
                 if 0 <= index - e[3] < self.frames and not overlaps(e[0], boxes)]
        self._kept = now + older
        return [(b, s, k) for b, s, k, _ in self._kept]

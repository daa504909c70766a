"""A face's first sliver at the left or right edge: covered from the frame the edge changes.

The edge search (:mod:`livecam.analysis.edges`) finds a face entering from the side once the
detector scores its mirrored sliver, and for some faces that is late: on the leak clip
``slide_left`` (``t1``'s third person, 180 px wide) the detector found nothing of 0.3 or more
on the mirrored strips, at any strip depth (50, 30 or 20 % of the frame's height) and with the
picture flipped, until 26 % of the face was in view (input frame 12, 0.41; 0.6 at 32 %), so
input frames 9-11 (7-19 % in view) showed the real sliver. ``slide_right`` (another person,
the same motion) scores 0.42 from 7 % in view: the two clips differ by the face, not the
strips (flipped, each side's pictures score the same within 0.08). Lower scores do not tell a
sliver from nothing: 0.35-0.48 boxes came at the right edge with no face in view.

What does tell it is that the edge changed. :class:`EdgeChange` keeps a small grey picture of
the outermost band of the left and right edges (:data:`BAND_SHARE` of the frame's width deep,
cells :data:`CELL_PX` tall) from the last frame followed; where :data:`MIN_CELLS` or more of
its cells now differ by :data:`~livecam.analysis.returning.CHANGED_LEVELS` grey levels beyond
the band's median change (an exposure change moves all of them), that stretch of the edge is
returned as an edge hit (unless most of the band changed: the whole picture did), which the
follower covers like the detector's (stretched along the
edge, remembered and reaching further in as it ages, dropped on a face followed there). A still
scene changes nothing (sensor noise averaged over a cell moves it by well under one level), so
it covers nothing there; the price is that anything moving across the side edges (a hand, a
shoulder) is covered for a few frames. Its cost: two resizes of a thin band a frame.
"""

from __future__ import annotations

import cv2
import numpy as np

from livecam.analysis.returning import CHANGED_LEVELS
from livecam.core.types import ImageBGR

#: The band's depth as a share of the frame's width (1280 px: 26 px). A face entering at 11 px
#: a frame (``slide_left``) fills it within two or three frames; deeper bands would take in
#: more of what moves inside the frame near the edge.
BAND_SHARE = 0.02
#: The cells' height along the edge (px).
CELL_PX = 8
#: Changed cells (within one stretch of the edge) that make a hit: a single cell is left out.
MIN_CELLS = 3
#: Unchanged cells a stretch may have inside it and still be one stretch.
GAP_CELLS = 2
#: A band with more than this share of its cells changed is left out: the whole picture
#: changed (a cut, the camera moved, a board over all of it), not a face come in at one place;
#: a face a third of the frame's height changes about a third of them.
MAX_CHANGED_SHARE = 0.75
#: The hit's score (an edge hit's sure score: :data:`livecam.analysis.edges.SURE_SCORE`).
SCORE = 0.6

Hit = tuple[np.ndarray, float, np.ndarray]


def band_pictures(image_bgr: ImageBGR) -> tuple[np.ndarray, np.ndarray]:
    """The left and right bands of ``image_bgr`` (H, W, 3) as grey cells (H // CELL_PX, 2)
    float32, the outer column first in each."""
    h, w = image_bgr.shape[:2]
    depth = max(4, round(BAND_SHARE * w))
    rows = max(1, h // CELL_PX)
    out = []
    for band in (image_bgr[:, :depth], image_bgr[:, w - depth:][:, ::-1]):
        grey = cv2.cvtColor(np.ascontiguousarray(band), cv2.COLOR_BGR2GRAY)
        out.append(cv2.resize(grey, (2, rows), interpolation=cv2.INTER_AREA).astype(np.float32))
    return out[0], out[1]


def changed_stretches(before: np.ndarray, now: np.ndarray) -> list[tuple[int, int]]:
    """(first cell, last cell + 1) of each stretch along the edge where ``now`` differs from
    ``before`` (both (N, 2) :func:`band_pictures`): cells changed by CHANGED_LEVELS beyond the
    median change, at least MIN_CELLS of them, at most GAP_CELLS unchanged ones apart; none
    where more than MAX_CHANGED_SHARE of the cells changed by CHANGED_LEVELS at all (the
    median taken out or not: a board over a textured backdrop moved them all by 30 levels and
    a few by 16 more)."""
    diff = now - before
    if float(np.mean((np.abs(diff) >= CHANGED_LEVELS).any(axis=1))) > MAX_CHANGED_SHARE:
        return []
    diff -= float(np.median(diff))
    moved = (np.abs(diff) >= CHANGED_LEVELS).any(axis=1)
    if float(np.mean(moved)) > MAX_CHANGED_SHARE:
        return []
    rows = np.flatnonzero(moved).tolist()
    out: list[tuple[int, int]] = []
    start = count = 0
    last = -GAP_CELLS - 2
    for r in rows:
        if r - last > GAP_CELLS + 1:
            if count >= MIN_CELLS:
                out.append((start, last + 1))
            start, count = r, 0
        count += 1
        last = r
    if count >= MIN_CELLS:
        out.append((start, last + 1))
    return out


class EdgeChange:
    """The side edges' bands of the last frame followed, and where they changed since (see the
    module docstring). Only the follower's thread; one :meth:`hits` per frame followed."""

    def __init__(self) -> None:
        self._before: tuple[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None

    def hits(self, image_bgr: ImageBGR) -> list[Hit]:
        """Edge hits (box (4,), score, keypoints (6, 2)) in frame px where a side edge of
        ``image_bgr`` changed since the last call: each box spans its stretch along the edge
        and as much across it, centred on the edge. None on the first frame or a new size."""
        h, w = image_bgr.shape[:2]
        now = band_pictures(image_bgr)
        before, self._before = self._before, ((h, w), now)
        if before is None or before[0] != (h, w):
            return []
        scale = h / now[0].shape[0]
        out: list[Hit] = []
        for side, (old, new) in enumerate(zip(before[1], now, strict=True)):
            for first, end in changed_stretches(old, new):
                y1, y2 = first * scale, end * scale
                half = 0.5 * (y2 - y1)
                x = 0.0 if side == 0 else float(w)
                box = np.array([x - half, y1, x + half, y2], np.float32)
                marks = np.tile(np.array([[x, 0.5 * (y1 + y2)]], np.float32), (6, 1))
                out.append((box, SCORE, marks))
        return out

"""A body entering at the left or right edge: covered from the frame it advances inward.

The edge search (:mod:`livecam.analysis.edges`) finds a face entering from the side once the
detector scores its mirrored sliver, and for some faces that is late: on the leak clip
``slide_left`` (``t1``'s third person, 180 px wide) the detector found nothing of 0.3 or more
on the mirrored strips, at any strip depth and with the picture flipped, until 26 % of the
face was in view (input frame 12), so input frames 9-11 (7-19 % in view) showed the real
sliver. Lower scores do not tell a sliver from nothing: 0.35-0.48 boxes came at the right
edge with no face in view.

What does tell it is the way it comes in. :class:`EdgeEntry` samples each side edge's band
(:data:`BAND_SHARE` of the frame's width deep) on a coarse grid: :data:`COLUMNS` columns
across it, one row of cells every :data:`CELL_SHARE` of the frame's height along it, each cell
per colour the sum of two points. A cell is *changed* where it differs from the band's
background by :data:`CHANGED_LEVELS` (the cells as they were before anything came in; a cell
that stays within that follows the scene, so light drifting is no change). A row's *depth* is
how far its changed cells reach in from one of the two outermost columns (over single
unchanged cells; the deepest of the row and its two neighbours, so a strand of hair does not
make a row come and go): something that came in over the edge. A stretch of at least
:data:`MIN_ROWS` rows (within :data:`GAP_ROWS` of each other) with depth, whose depth summed
over its rows grew by :data:`MIN_GROWTH` cells since the last frame, is an edge hit: the body
advancing inward. The follower covers it like the detector's edge hits (stretched along the
edge, remembered for a few frames and reaching further in as it ages, dropped on a face
followed there), unless it touches a face followed (that face's hair or shoulder).

What changes in place is left out: a change that does not reach the outermost columns (the leak
clips' frame code, a moving thing inside the frame near the edge); a row that changed inside
the band before it changed at the edge (someone going out at the edge: a row's depth grows as
they leave too); a row that came in again within :data:`FLICKER_FRAMES` frames of its last
coming in (a blinking light, a screen, a hand waved in and out: ignored for
:data:`FLICKER_HOLD_FRAMES` frames from then); a band that changed nearly everywhere
(:data:`MAX_CHANGED_SHARE`: a cut, the camera moved, the exposure jumped: the background is
taken anew); a row that has stayed changed for :data:`SETTLE_FRAMES` frames (it is the
background now). The price: something that does enter at a side edge (a hand, a shoulder, a
mug, the hair before a face) is covered while it advances and for the edge memory's few
frames after.

The whole step is small numpy on views of the frame (2 x 45 x 8 cells at 720p, sums and
comparisons of at most :data:`~livecam.analysis.keepgil.MAX_HELD` numbers, no copies) and
Python on the cells' lists, so it keeps the GIL (``tests/test_keeps_gil.py``).
"""

from __future__ import annotations

import numpy as np

from livecam.analysis.keepgil import copy_into
from livecam.core.types import ImageBGR

#: The band's depth as a share of the frame's width (1280 px: 51 px). ``slide_left``'s face,
#: its hair before it, comes in 11 px a frame: a column or two more each frame.
BAND_SHARE = 0.04
#: Sample columns across the band (outermost first).
COLUMNS = 8
#: A cell's height along the edge as a share of the frame's height (720 px: 16 px; 45 rows).
CELL_SHARE = 1 / 45
#: A cell has changed when its six samples (two points, three colours) moved this much from
#: the background, summed over its colours (so a skin-coloured face on a grey wall as bright
#: changes too): 16 levels a sample. The leak clips' sensor noise (sigma 2 a colour) moves it
#: by about 7; a face's sliver on a backdrop by hundreds.
CHANGED_LEVELS = 6 * 16.0
#: Rows with depth, within GAP_ROWS of each other, that make a hit: a thin thing is left out.
MIN_ROWS = 3
GAP_ROWS = 1
#: ... and whose depth, summed over those rows, grew by this many cells: it advanced inward.
MIN_GROWTH = 3
#: A band with more than this share of its cells changed: the whole picture changed (a cut,
#: the camera moved, the exposure jumped), not a body come in at one place. Taken anew.
MAX_CHANGED_SHARE = 0.75
#: A cell within CHANGED_LEVELS of its background moves the background this share of the way
#: to it each frame (light drifting, auto exposure).
FOLLOW_SHARE = 0.25
#: A row that came in again (depth after none) within this many frames followed of its last
#: coming in changes in place ...
FLICKER_FRAMES = 8
#: ... and is left out for this many frames followed.
FLICKER_HOLD_FRAMES = 90
#: A row with depth for this many frames followed is the background now (someone who came in
#: and stays at the edge): taken anew.
SETTLE_FRAMES = 45
#: The hit's score (an edge hit's sure score: :data:`livecam.analysis.edges.SURE_SCORE`).
SCORE = 0.6

Hit = tuple[np.ndarray, float, np.ndarray]


class _Side:
    """One side's background cells (one picture per colour) and its rows' history."""

    def __init__(self, rows: int) -> None:
        self.background = [np.zeros((rows, COLUMNS), np.float32) for _ in range(3)]
        self.depth = [0] * rows  # each row's depth on the last frame
        self.since: list[int | None] = [None] * rows  # the frame since which it has depth
        self.entered: list[int | None] = [None] * rows  # the frame it last came in
        self.inside = [False] * rows  # changed inside the band, not at the edge, last frame
        self.quiet_until = [-1] * rows  # left out up to this frame (flicker)


class EdgeEntry:
    """The side edges' bands and what came in over them (see the module docstring). Only the
    follower's thread; one :meth:`hits` per frame followed."""

    def __init__(self) -> None:
        self._size: tuple[int, int] | None = None
        self._sides: list[_Side] = []
        self._index = -1  # the last frame's index
        # scratch, (rows, COLUMNS) float32 each: the cells now (one per colour), a change
        self._now: list[np.ndarray] = []
        self._part = np.zeros((0, COLUMNS), np.float32)
        self._diff = np.zeros((0, COLUMNS), np.float32)

    def hits(self, image_bgr: ImageBGR, index: int) -> list[Hit]:
        """Edge hits (box (4,), score, keypoints (6, 2)) in frame px where a body advanced in
        over a side edge of ``image_bgr`` (H, W, 3) uint8 since the last call: each box spans
        its stretch along the edge and as much across it, centred on the edge. ``index``: the
        frame's index (input frames: live mode skips some, and the times here are in input
        frames). None on the first frame, a new size or an index that went back (a new
        stream), or on a frame too small to watch."""
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        grid = _grid(h, w)
        if grid is None:
            return []
        cell, step, rows = grid
        fresh = self._size != (h, w) or index <= self._index
        self._index = index
        if fresh:
            self._size = (h, w)
            self._sides = [_Side(rows), _Side(rows)]
            self._now = [np.zeros((rows, COLUMNS), np.float32) for _ in range(3)]
            self._part = np.zeros((rows, COLUMNS), np.float32)
            self._diff = np.zeros((rows, COLUMNS), np.float32)
        out: list[Hit] = []
        for k, side in enumerate(self._sides):
            self._sample(image_bgr, k == 1, cell, step, rows, w)
            if fresh:
                for bg, now in zip(side.background, self._now, strict=True):
                    copy_into(bg, now)
                continue
            for first, end in self._advanced(side, index):
                y1, y2 = first * cell, end * cell
                half = 0.5 * (y2 - y1)
                x = 0.0 if k == 0 else float(w)
                box = np.array([x - half, y1, x + half, y2], np.float32)
                marks = np.array([[x, 0.5 * (y1 + y2)]] * 6, np.float32)
                out.append((box, SCORE, marks))
        return out

    def _sample(
        self, image_bgr: ImageBGR, right: bool, cell: int, step: int, rows: int, w: int
    ) -> None:
        """The band's cells into ``self._now``: per colour and cell the sum of two points (a
        quarter and three quarters down the cell), columns outermost first. Views and ufuncs
        on ``rows x COLUMNS`` numbers: no copy, the GIL kept."""
        start = step // 2
        if right:
            cols = slice(w - 1 - start, w - 1 - start - step * COLUMNS, -step)
        else:
            cols = slice(start, start + step * COLUMNS, step)
        first = True
        for y0 in (cell // 4, (3 * cell) // 4):
            points = image_bgr[y0 : y0 + cell * rows : cell, cols]
            for c in range(3):
                if first:
                    np.positive(points[:, :, c], out=self._now[c])  # only the output cast
                else:
                    np.positive(points[:, :, c], out=self._part)
                    np.add(self._now[c], self._part, out=self._now[c])
            first = False

    def _advanced(self, side: _Side, index: int) -> list[tuple[int, int]]:
        """(first row, last row + 1) of each stretch of ``side`` whose depth grew this frame;
        the side's background and history brought up to date."""
        diff, part = self._diff, self._part
        diff.fill(0.0)
        for now, bg in zip(self._now, side.background, strict=True):
            np.subtract(now, bg, out=part)
            np.abs(part, out=part)
            np.add(diff, part, out=diff)
        changed = np.greater_equal(diff, CHANGED_LEVELS).tolist()
        rows = len(changed)
        total = sum(sum(r) for r in changed)
        if total > MAX_CHANGED_SHARE * rows * COLUMNS:  # the whole picture changed
            for now, bg in zip(self._now, side.background, strict=True):
                copy_into(bg, now)
            side.depth = [0] * rows
            side.since = [None] * rows
            return []
        # cells that stayed close follow the scene (light drifting); changed ones keep the
        # background they changed from
        np.less(diff, CHANGED_LEVELS, out=diff)  # 1.0 where unchanged
        np.multiply(diff, FOLLOW_SHARE, out=diff)
        for now, bg in zip(self._now, side.background, strict=True):
            np.subtract(now, bg, out=part)
            np.multiply(part, diff, out=part)
            np.add(bg, part, out=bg)
        depth = [reach_in(row) for row in changed]
        for r, d in enumerate(depth):
            since = side.since[r]
            if d and since is not None and index - since >= SETTLE_FRAMES:  # it stays there
                for now, bg in zip(self._now, side.background, strict=True):
                    copy_into(bg[r], now[r])
                depth[r] = 0
        # a row's depth is the deepest of it and its neighbours': a strand of hair, a gap in
        # it, does not make a row come and go
        spread = [max(depth[max(0, r - 1) : r + 2]) for r in range(rows)]
        for r in range(rows):
            if spread[r] and not side.depth[r]:  # came in (again)
                last = side.entered[r]
                if last is not None and index - last <= FLICKER_FRAMES:  # in, out, in: in place
                    side.quiet_until[r] = index + FLICKER_HOLD_FRAMES
                side.entered[r] = index
            if not spread[r]:
                side.since[r] = None
            elif side.since[r] is None:
                side.since[r] = index
        # a row that changed inside the band first came from inside the frame (someone going
        # out at the edge, a hand moving by it): its depth growing is no entry
        skip = [index <= q or was for q, was in zip(side.quiet_until, side.inside, strict=True)]
        inside = [any(row) for row in changed]
        before, side.depth = side.depth, spread
        side.inside = [
            (i and not d) or (was and d > 0)
            for i, d, was in zip(inside, spread, side.inside, strict=True)
        ]
        return _stretches(spread, before, skip)


def _grid(h: int, w: int) -> tuple[int, int, int] | None:
    """(cell height px, column step px, rows) for an (H, W) frame; None when too small."""
    cell = max(4, round(CELL_SHARE * h))
    step = max(1, round(BAND_SHARE * w / COLUMNS))
    rows = h // cell
    if rows < MIN_ROWS or w < 4 * step * COLUMNS:
        return None
    return cell, step, rows


def reach_in(row: list[bool]) -> int:
    """How far a row's changed cells reach in from its start (the edge): from a changed cell
    among the outer two, through gaps of one unchanged cell; 0 when neither of the outer two
    changed. (The occluders' look uses it too: :mod:`livecam.analysis.occluders`.)"""
    if not (row[0] or row[1]):
        return 0
    d = 0
    for c, on in enumerate(row):
        if on:
            d = c + 1
        elif c + 1 < len(row) and not row[c + 1] and c >= 1:
            break
    return d


def _stretches(depth: list[int], before: list[int], skip: list[bool]) -> list[tuple[int, int]]:
    """(first, end) of each stretch of rows with depth (at most GAP_ROWS apart, MIN_ROWS or
    more of them) whose depth, summed over its rows not left out (``skip``: flicker, or come
    from inside), grew by MIN_GROWTH cells or more since ``before`` (the rows' depths on the
    last frame)."""
    out: list[tuple[int, int]] = []
    start = count = growth = 0
    last = -GAP_ROWS - 2
    for r, d in enumerate(depth):
        if d == 0:
            continue
        if r - last > GAP_ROWS + 1:
            if count >= MIN_ROWS and growth >= MIN_GROWTH:
                out.append((start, last + 1))
            start, count, growth = r, 0, 0
        count += 1
        if not skip[r]:
            growth += d - before[r]
        last = r
    if count >= MIN_ROWS and growth >= MIN_GROWTH:
        out.append((start, last + 1))
    return out

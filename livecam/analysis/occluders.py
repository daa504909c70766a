"""Followed faces that something advances over from one side: their look, cell by cell.

While a board, a hand or another person starts to slide over a face, the face mesh goes on
fitting the whole face (it predicts the hidden part) and the detector goes on scoring it well,
over :class:`~livecam.analysis.occlusion.PartlyHidden`'s weak score, so the face stays swapped
and its swap is painted on what hides it (a *ghost*): on the leak clip ``hidden`` with 20-30 %
of the face covered as the board comes (input frames 7-8, the detector's score 0.72 and 0.64
against 0.90 in view), and as it goes, the face followed again with 30 % still covered (input
frame 61, 0.62).

:class:`Advancing` keeps, per followed face, a small picture of the inner part of its box
around the raw mesh (:data:`GRID` cells across and down, each cell per colour the sum of two
points, :data:`INSET` of the box in from each side so that the cells lie on the face, not on
the background around its outline): its *look*. A cell has *changed* where it differs from the
look by :data:`CHANGED_LEVELS` (beyond the change common to the whole face, as an exposure
change makes it). A face is *covered from a side* where at least :data:`SIDE_SHARE` of its rows
(for the left and right sides) or columns (top, bottom) have changed cells reaching in from
that side: their outermost cell or the one next to it changed, and the run goes on inward over
single unchanged cells. Cells on such a run keep the look they changed from, so an occluder
that stops is still seen; the other cells follow the face (:data:`FOLLOW_SHARE` of the way
each frame, a changed one at once): what changes inside the face (eyes, mouth, a shadow) is
the face's own.

A look alone does not tell an occluder from a head turning: turning, the face's far side slides
out of the box from that side and the look changes as it would under a board (the leak clip
``turn``: 36 of its 100 frames). So the follower withholds a face covered from a side only
where its own detection is also :data:`~livecam.analysis.occlusion.SIDE_DROP` under its best,
or where the detector finds no box on it at all
(:class:`~livecam.analysis.occlusion.PartlyHidden`): on ``turn`` that leaves frames turned 42
degrees or more, where the swap already fades into the cover.

A cell changed for :data:`SETTLE_LOOKS` looks in a row is the face's look now (someone who
keeps a hand on the chin, hair fallen over the forehead). A face that comes much nearer or
goes much further (:data:`RESIZE_SHARE`) gets a new look. The looks are kept while the
tracker remembers the face (lost behind the board), so a face found again while partly hidden
is compared with its look from before and the board still over it shows; a face first seen
partly hidden has no look to compare with.

The whole step is Python on 3 x :data:`GRID` x :data:`GRID` numbers, the pixels read one by
one (``ndarray.item``), so it keeps the GIL (``tests/test_keeps_gil.py``); 0.28-0.36 ms a face
at the median on the 2-core development machine (``python -m scripts.bench_occluders``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from livecam.analysis.edge_entry import reach_in
from livecam.core.types import ImageBGR

#: Cells across and down the face's inner box.
GRID = 12
#: The look covers the face's box less this share of its size on each side: the box from the
#: landmarks ends at the face's outline, where a cell would hold background that changes
#: behind a moving face.
INSET = 0.1
#: A cell has changed when its six samples (two points, three colours) moved this much from
#: the look, summed, beyond the face's median change: 16 levels a sample. Sensor noise (sigma
#: 2 a colour) moves it by about 7; a board over skin by hundreds.
CHANGED_LEVELS = 6 * 16.0
#: A cell within CHANGED_LEVELS of the look moves it this share of the way each frame.
FOLLOW_SHARE = 0.5
#: Rows (columns) with change reaching in from one side, as a share of all: covered from there.
SIDE_SHARE = 0.5
#: A face whose box grew or shrank by more than this share since its look was taken gets a new
#: look (it came nearer or went further).
RESIZE_SHARE = 0.15
#: Frames looked at in a row after which a changed cell is the face's look.
SETTLE_LOOKS = 30


@dataclass(slots=True)
class _Look:
    """One face's look: per cell (row after row) its six samples' sum per colour, how many
    looks in a row it has been changed; and the face's size (box, px) then."""

    cells: list[list[float]]  # three lists (B, G, R) of GRID * GRID sums
    size: tuple[float, float]
    changed_for: list[int] = field(default_factory=lambda: [0] * (GRID * GRID))


class Advancing:
    """The followed faces' looks and which faces something advances over (see the module
    docstring). Only the follower's thread; one :meth:`update` per frame followed."""

    def __init__(self) -> None:
        self._looks: dict[int, _Look] = {}

    def update(self, image_bgr: ImageBGR, track_ids: list[int],
               boxes_xyxy: list[tuple[float, float, float, float]], known: set[int],
               ) -> list[int]:
        """Indices of the faces followed this frame that something covers from a side in
        ``image_bgr`` (H, W, 3) uint8; their looks brought up to date. ``track_ids`` and
        ``boxes_xyxy``: the faces' ids and boxes around their raw mesh, px (the smoothed one
        trails a moving face); ``known``: the track ids still remembered (followed, lost or
        covered), the others' looks are forgotten."""
        for tid in [t for t in self._looks if t not in known]:
            del self._looks[tid]
        out: list[int] = []
        for i, (tid, box) in enumerate(zip(track_ids, boxes_xyxy, strict=True)):
            if tid < 0:
                continue
            now = sample(image_bgr, box)
            if now is None:
                continue
            size = (box[2] - box[0], box[3] - box[1])
            look = self._looks.get(tid)
            if look is None or any(abs(a - b) > RESIZE_SHARE * b
                                   for a, b in zip(size, look.size, strict=True)):
                self._looks[tid] = _Look(now, size)
            elif _compare(look, now):
                out.append(i)
        return out


def sample(image_bgr: ImageBGR, box: tuple[float, float, float, float],
           ) -> list[list[float]] | None:
    """The cells of ``box`` (x1, y1, x2, y2 px) less :data:`INSET` on each side: per colour
    (B, G, R) and cell (row after row) the sum of two points, a quarter and three quarters
    across and down the cell. None where a point falls outside the frame or the cells would
    be under 2 px. Pixels read one by one (``item``): numpy keeps the GIL."""
    h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
    bw, bh = box[2] - box[0], box[3] - box[1]
    cw, ch = (1.0 - 2 * INSET) * bw / GRID, (1.0 - 2 * INSET) * bh / GRID
    if cw < 2 or ch < 2:
        return None
    x0, y0 = box[0] + INSET * bw, box[1] + INSET * bh
    if x0 < 0 or y0 < 0 or x0 + GRID * cw > w - 1 or y0 + GRID * ch > h - 1:
        return None
    out: list[list[float]] = [[], [], []]
    item = image_bgr.item
    for r in range(GRID):
        ya, yb = int(y0 + (r + 0.25) * ch), int(y0 + (r + 0.75) * ch)
        for c in range(GRID):
            xa, xb = int(x0 + (c + 0.25) * cw), int(x0 + (c + 0.75) * cw)
            for k in range(3):
                out[k].append(float(item(ya, xa, k) + item(yb, xb, k)))
    return out


def _compare(look: _Look, now: list[list[float]]) -> bool:
    """True when the cells of ``now`` that changed from ``look`` reach in from a side
    (:func:`side_cells`); the look brought up to date: those cells keep it (unless changed
    for :data:`SETTLE_LOOKS` looks), the others follow the face."""
    n = GRID * GRID
    diff = [0.0] * n
    for was, cells in zip(look.cells, now, strict=True):
        d = [a - b for a, b in zip(cells, was, strict=True)]
        common = sorted(d)[n // 2]  # the median: an exposure change moves every cell
        diff = [t + abs(x - common) for t, x in zip(diff, d, strict=True)]
    flat = [d >= CHANGED_LEVELS for d in diff]
    covered, held = side_cells([flat[r * GRID:(r + 1) * GRID] for r in range(GRID)])
    # what changed inside the face is the face's own (its eyes, mouth, a shadow): the look
    # takes it; what reaches in from a side keeps the look it changed from
    shares = [0.0] * n
    for k, on in enumerate(held):
        look.changed_for[k] = look.changed_for[k] + 1 if on else 0
        if on and look.changed_for[k] < SETTLE_LOOKS:
            continue
        shares[k] = 1.0 if flat[k] else FOLLOW_SHARE
        if on:
            look.changed_for[k] = 0
    for was, cells in zip(look.cells, now, strict=True):
        for k, share in enumerate(shares):
            if share:
                was[k] += share * (cells[k] - was[k])
    return covered


def side_cells(changed: list[list[bool]]) -> tuple[bool, list[bool]]:
    """Whether at least :data:`SIDE_SHARE` of the rows of ``changed`` (n rows of n bools)
    reach in from the left or from the right, or of its columns from the top or the bottom
    (:func:`_reach`); and which cells (flat, row after row) lie on such a reach."""
    n = len(changed)
    on = [False] * (n * n)
    covered = False
    for lines, cell in ((changed, lambda line, k: line * n + k),
                        ([[row[c] for row in changed] for c in range(n)],
                         lambda line, k: k * n + line)):
        from_start = [reach_in(line) for line in lines]
        from_end = [reach_in(line[::-1]) for line in lines]
        for i, (a, b) in enumerate(zip(from_start, from_end, strict=True)):
            for k in range(a):
                on[cell(i, k)] = True
            for k in range(n - b, n):
                on[cell(i, k)] = True
        need = SIDE_SHARE * n
        if sum(1 for d in from_start if d) >= need or sum(1 for d in from_end if d) >= need:
            covered = True
    return covered, on

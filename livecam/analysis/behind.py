"""A lost face that no cover of its own is on may be behind a face in view: that face's sides
are covered.

A lost face is covered where its tracker predicts it (:class:`~livecam.analysis.memory.
HiddenFaces`). Followed only now and then (live mode on a loaded host), two faces crossing
can leave that prediction far from the face: across a gap the two tracks take each other's
person and learn each other's speed the wrong way, or a gap of tens of frames leaves them
where the faces were (``crossing``: both lost covers hundreds of pixels from either face).
The face behind, partly in view beside the face in front and not detected (the detector
scores the pair as one face, or the sliver not at all), would then be under no cover.

A person hidden in a frame is hidden by something: a board, the frame's edge, or another
person. So a lost face still covered whose cover lies on no face in view, but which could
have reached one since it was last seen (:data:`REACH` of its width per input frame), may be
behind that face: a band :data:`SIDE` of that face's width out on either side is covered
(``LOST``, no track: no held swap is drawn there), reaching :data:`UNDER` of its width under
the face's own box (the face in front's outline is wider than its mesh). Covers are drawn
under swaps (``FaceCover.cover_into``'s ``front`` on the GPU), so the face in view keeps its
swap and what is seen beside it stays covered. A lost face whose cover lies on a face in view
is accounted for there (the crossing face behind, predicted behind the face in front; the
weak detections coming out beside it are covered by ``HiddenFaces`` itself).

Plain Python on a few boxes (the follower keeps the GIL: :mod:`livecam.analysis.keepgil`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from livecam.core.types import Unswappable, WithheldFaces

#: How far a lost face may have gone since it was last seen, in its own widths per input
#: frame (``crossing``: the face behind came to the face in front from 0.04-0.06 a frame
#: away; a face 170 px wide at 720p crossing the frame in under two seconds moves 0.15).
REACH = 0.15
#: The covered band beside a face in view, in that face's widths: a face behind it with
#: any part in view has that part within one width of its side.
SIDE = 1.0
#: How far the band reaches under the face in view's box, in its widths.
UNDER = 0.25
#: The band's height beyond the face in view's box, top and bottom, in its heights.
TALLER = 0.1


def _meet(a: Sequence[float], b: Sequence[float]) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def beside_faces(lost: Sequence[tuple[Sequence[float], int]],
                 in_view: Sequence[Sequence[float]]) -> WithheldFaces:
    """The bands to cover (``LOST``, no track): ``lost``: each lost face still covered, as
    its cover box (4,) px and the input frames since it was last seen; ``in_view``: boxes
    (4,) px of this frame's faces in view (swapped or withheld). Empty where no lost face is
    astray or none could be behind a face in view."""
    near: set[int] = set()
    for box, since in lost:
        if any(_meet(box, face) for face in in_view):
            continue  # covered where a face in view is: behind it, accounted for
        reach = REACH * (box[2] - box[0]) * since
        region = (box[0] - reach, box[1] - reach, box[2] + reach, box[3] + reach)
        near.update(j for j, face in enumerate(in_view) if _meet(region, face))
    rows: list[list[float]] = []
    for j in sorted(near):
        x1, y1, x2, y2 = in_view[j]
        w, h = x2 - x1, y2 - y1
        top, bottom = y1 - TALLER * h, y2 + TALLER * h
        rows.append([x1 - SIDE * w, top, x1 + UNDER * w, bottom])
        rows.append([x2 - UNDER * w, top, x2 + SIDE * w, bottom])
    if not rows:
        return WithheldFaces()
    n = len(rows)
    return WithheldFaces(np.array(rows, np.float32), np.full((n, 0, 2), np.nan, np.float32),
                         np.full(n, -1, np.int64), np.full(n, Unswappable.LOST, np.uint8))

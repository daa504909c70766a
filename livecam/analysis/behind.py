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
person. So a lost face (covered, or, its cover over or never drawn, for ``lost_cover_frames``
from the frame it was found lost on, where the tracker predicts it while a quarter of that is
in the frame: a gap of 33 frames ends the cover before it is drawn, and an astray cover ends
while the face behind is still coming out) whose cover lies on no face in view, but which
could have reached one since it was last seen (:data:`REACH` of its width per input frame),
may be behind that face: a band :data:`SIDE` of that face's width out on either side is
covered (``LOST``, no track: no held swap is drawn there), reaching :data:`UNDER` of its
width under the face's own box (the face in front's outline is wider than its mesh). Covers
are drawn under swaps (``FaceCover.cover_into``'s ``front`` on the GPU), so the face in view
keeps its swap and what is seen beside it stays covered.

Accounted for, with no band: a lost face whose cover lies on a face in view, or along its
side within :data:`UNDER` of its width (the crossing face behind, predicted behind the face
in front; the weak detections coming out beside it are covered by ``HiddenFaces`` itself),
and one that a face in view tracked only since it was last seen could be, within its reach
(``enter`` with live mode's drops: the face walking in lost at the edge and found again under
a new track beside its cover; ``crossing`` after a long gap: both faces lost, the face in
front found again as a new face, which stands for one of them, not for both).

Plain Python on a few boxes (the follower keeps the GIL: :mod:`livecam.analysis.keepgil`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from livecam.core.boxes import meet, share_in_frame
from livecam.core.types import Unswappable, WithheldFaces
from livecam.track.bytetrack import LostTrack

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


def _reach(box: Sequence[float], since: int) -> tuple[float, float, float, float]:
    """Where a lost face covered at ``box`` may be ``since`` input frames after it was seen."""
    r = REACH * (box[2] - box[0]) * since
    return box[0] - r, box[1] - r, box[2] + r, box[3] + r


def _centre_gap(a: Sequence[float], b: Sequence[float]) -> float:
    return abs(a[0] + a[2] - b[0] - b[2]) + abs(a[1] + a[3] - b[1] - b[3])


class BesideLost:
    """The bands to cover beside faces in view that a lost face may be behind (see the module
    docstring). Remembers the frame each track was first in view. Only the follower's
    thread."""

    def __init__(self, cover_frames: int) -> None:
        self.cover_frames = cover_frames
        self._born: dict[int, int] = {}  # track id -> input frame first in view
        # track id -> (input frame it was first found lost on, frames lost by then)
        self._noticed: dict[int, tuple[int, int]] = {}

    def update(self, lost: Sequence[tuple[int, Sequence[float], int]],
               in_view: Sequence[tuple[int, Sequence[float]]], index: int,
               known: set[int], lost_tracks: Sequence[LostTrack] = (),
               size: tuple[int, int] = (0, 0)) -> WithheldFaces:
        """``lost``: each lost face still covered, as its track id, cover box (4,) px and
        the input frames since it was last seen; ``in_view``: this frame's faces in view
        (swapped or withheld), as track id (-1: none) and box (4,) px; ``known``: the track
        ids still remembered (the others are forgotten); ``lost_tracks``: the tracker's lost tracks,
        of which those not in ``lost`` count too, where the tracker predicts them, for
        ``cover_frames`` input frames from the frame they were found lost on (not from the
        frame last seen: lost across a long gap, or astray, their cover has ended), while a
        quarter of that box is in the frame of ``size`` (w, h) px, or wherever it is when
        they were found lost over more than ``cover_frames`` input frames (never covered).
        The bands, withheld ``LOST`` with no track; empty where every lost face is
        accounted for."""
        for tid, _ in in_view:
            if tid >= 0:
                self._born.setdefault(tid, index)
        for tid in [t for t in self._born if t not in known]:
            del self._born[tid]
        if not lost and not lost_tracks:  # the usual frame: no one lost, nothing to band
            self._noticed.clear()
            return WithheldFaces()
        covered = {tid for tid, _, _ in lost}
        faces: list[tuple[Sequence[float], int]] = [(box, since) for _, box, since in lost]
        w, h = size
        for lt in lost_tracks:
            first, gap = self._noticed.setdefault(lt.track_id, (index, lt.frames_lost))
            box = lt.box_xyxy.tolist()
            if lt.track_id in covered or index - first > self.cover_frames:
                continue
            if share_in_frame(box, w, h) >= 0.25 or gap > self.cover_frames:
                faces.append((box, lt.frames_lost))
        lost_now = {lt.track_id for lt in lost_tracks}
        for tid in [t for t in self._noticed if t not in lost_now]:
            del self._noticed[tid]
        boxes = [box for _, box in in_view]
        # a cover on a face in view, or along its side, is where that face hides it
        sides = [(x1 - UNDER * (x2 - x1), y1, x2 + UNDER * (x2 - x1), y2)
                 for x1, y1, x2, y2 in boxes]
        astray = [(box, since) for box, since in faces
                  if not any(meet(box, face) for face in sides)]
        if not astray:
            return WithheldFaces()
        # a face tracked only since a lost face was last seen may be that face, found again
        # under a new track: each such face stands for the nearest one it could be
        left = list(astray)
        for tid, face in in_view:
            could = [(_centre_gap(box, face), k) for k, (box, since) in enumerate(left)
                     if (tid < 0 or self._born[tid] > index - since)
                     and meet(_reach(box, since), face)]
            if could:
                del left[min(could)[1]]
        near = sorted({j for box, since in left for j, face in enumerate(boxes)
                       if meet(_reach(box, since), face)})
        if not near:
            return WithheldFaces()
        rows: list[list[float]] = []
        for j in near:
            x1, y1, x2, y2 = boxes[j]
            fw, fh = x2 - x1, y2 - y1
            top, bottom = y1 - TALLER * fh, y2 + TALLER * fh
            rows.append([x1 - SIDE * fw, top, x1 + UNDER * fw, bottom])
            rows.append([x2 - UNDER * fw, top, x2 + SIDE * fw, bottom])
        n = len(rows)
        # from Python numbers: a fill or copy lets numpy go of the GIL (keepgil)
        return WithheldFaces(np.array(rows, np.float32), np.empty((n, 0, 2), np.float32),
                             np.array([-1] * n, np.int64),
                             np.array([int(Unswappable.LOST)] * n, np.uint8))

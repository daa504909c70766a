"""Weak detections that no face accounts for: covered, so a face first seen partly hidden is
never shown as it is.

A face is followed (and swapped) only from a confident detection (the tracker's
``high_score_threshold``); a weak one (down to ``low_score_threshold``) only keeps a lost face
covered or shows it coming back out (:class:`~livecam.analysis.memory.HiddenFaces`). A face
that is partly hidden from the first frame it is in (a stream that starts with the face behind
a board, someone who walks in behind one) has no lost face to be: on the leak clip ``hidden``
followed from input frame 8 on (the face 30 % under the board, scored 0.64: not enough to
start a track), the detector scores it 0.38-0.50 from then on and it was shown as it is until
the board hid it, and again as it came out (input frames 55-60), where no lost face's place
was watched.

A detection strong enough to be followed but under the tracker's ``new_track_score_threshold``
(0.7), that no track takes, is as alone: it is withheld that frame and remembered by nothing
(no track, so no lost face). On ``hidden`` followed from input frame 8 every 5th-8th frame
(live mode under load from a camera's first frame), the face 30 % under the board scored
0.64, and the next frame followed had 10-20 % of it in view and no detection (input frames
13-14): it was shown as it is, and so was input frame 56 as the board slid away (no place
was watched).

:class:`WeakFaces` covers each detection from :data:`MIN_SCORE` to under the score that
starts a track that lies in the frame and mostly (:data:`EXPLAINED_SHARE`) on no face swapped
or withheld in the same frame that something remembers (a track, or a lost face's cover,
band or watched place: ``LOST``), grown by :data:`GROWTH` (the detector's box on a partly
seen face is often a fraction of it: on ``hidden``, 69 px on the uncovered corner of a 180 px
face). The place stays covered for
:data:`MEMORY_FRAMES` input frames after its last such detection (the last 10-20 % of the face,
which the detector does not find, goes behind the board meanwhile), unless a face swapped in
the frame stands on it (the face is followed now); then, where its cover ended, it is handed to
the return watch (:class:`~livecam.analysis.returning.ReturnWatch`, through :attr:`expired`),
which covers it again from the frame it changes, as for a lost face.

A weak detection of no face, a face-like pattern, is covered as well: on the leak clips none
scores :data:`MIN_SCORE` away from a face (``half_hidden``: a board's corner at 0.30-0.32,
``hidden``: the board at 0.31 once). Python floats in the usual frame (no weak detection, no
place remembered: nothing is done), so the follower keeps the GIL
(:mod:`livecam.analysis.keepgil`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from livecam.core.boxes import box_iou, share_in
from livecam.core.types import Faces, Unswappable, WithheldFaces

#: A weak detection scoring under this is left alone (``hidden``: the face behind the board
#: 0.36-0.51; the board itself, and a board's corner on ``half_hidden``, 0.30-0.32).
MIN_SCORE = 0.35
#: A weak detection with this share of its box on a face swapped or withheld in the same frame
#: is that face (its cover or swap is there already).
EXPLAINED_SHARE = 0.5
#: The cover is the detection's box grown by this share of its size (each side by half of it).
GROWTH = 1.0
#: Input frames a place stays covered after its last weak detection.
MEMORY_FRAMES = 8
#: A remembered place whose box overlaps a new weak detection's cover this much (IoU) is the
#: same place: it takes the new cover.
SAME_PLACE_IOU = 0.2
#: A face swapped in the frame with this share of its box in a remembered place ends it.
ON_PLACE_SHARE = 0.5


@dataclass(slots=True)
class _Place:
    box: list[float]  # x1, y1, x2, y2 px: the cover
    last_index: int  # the input frame of its last weak detection


class WeakFaces:
    """Places of weak detections no face accounts for (see the module docstring). Only the
    follower's thread; one :meth:`update` per frame followed."""

    def __init__(self) -> None:
        self._places: list[_Place] = []
        #: boxes (4,) float32 of the places whose cover ended in the last :meth:`update`: the
        #: return watch's to watch
        self.expired: list[np.ndarray] = []

    @property
    def remembered(self) -> bool:
        return bool(self._places)

    def update(self, detections: Faces | None, track_score: float, swapped: Faces,
               withheld: WithheldFaces, index: int, size: tuple[int, int]) -> WithheldFaces:
        """The places to cover in frame ``index`` (withheld ``NO_MESH``, track id -1):
        ``detections``' boxes scoring from :data:`MIN_SCORE` to under ``track_score`` (the
        score that starts a track; the whole-frame detections, None where none were run)
        that lie inside the frame of ``size`` (W, H) and mostly on none of ``swapped`` and
        ``withheld`` (this frame's faces) that is remembered: with a track, or ``LOST`` (a
        lost face's cover, band or watched place; a face withheld with no track is only
        this frame's), and the places such detections showed in the last
        :data:`MEMORY_FRAMES`."""
        self.expired = []
        fresh: list[list[float]] = []
        if detections is not None and len(detections):
            w, h = size
            others: list[list[float]] | None = None
            for box, score in zip(detections.boxes_xyxy.tolist(), detections.scores.tolist(),
                                  strict=True):
                if not MIN_SCORE <= score < track_score:
                    continue
                if box[0] < 0 or box[1] < 0 or box[2] > w or box[3] > h:
                    continue  # cut by the frame's edge: the edge search's (edges.py)
                if others is None:
                    others = swapped.boxes_xyxy.tolist() + [
                        b for b, t, r in zip(withheld.boxes_xyxy.tolist(),
                                             withheld.track_ids.tolist(),
                                             withheld.reasons.tolist(), strict=True)
                        if t >= 0 or r == Unswappable.LOST]
                if any(share_in(box, o) >= EXPLAINED_SHARE for o in others):
                    continue
                cx, cy = 0.5 * (box[0] + box[2]), 0.5 * (box[1] + box[3])
                hw = 0.5 * (box[2] - box[0]) * (1 + GROWTH)
                hh = 0.5 * (box[3] - box[1]) * (1 + GROWTH)
                fresh.append([cx - hw, cy - hh, cx + hw, cy + hh])
        if not fresh and not self._places:
            return WithheldFaces()
        for cover in fresh:
            same = [p for p in self._places if box_iou(cover, p.box) >= SAME_PLACE_IOU]
            for p in same:
                self._places.remove(p)
            self._places.append(_Place(cover, index))
        faces = swapped.boxes_xyxy.tolist() if len(swapped) else []
        kept: list[_Place] = []
        for p in self._places:
            if any(share_in(f, p.box) >= ON_PLACE_SHARE for f in faces):
                continue  # the face is followed now
            if index - p.last_index > MEMORY_FRAMES:
                self.expired.append(np.array(p.box, np.float32))
                continue
            kept.append(p)
        self._places = kept
        if not kept:
            return WithheldFaces()
        n = len(kept)
        return WithheldFaces(np.array([p.box for p in kept], np.float32),
                             np.full((n, 0, 2), np.nan, np.float32),
                             np.full(n, -1, np.int64),
                             np.full(n, Unswappable.NO_MESH, np.uint8))

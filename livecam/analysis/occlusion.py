"""Followed faces that something now hides in part: covered, not swapped, so that no swap is
painted on what hides them.

The face mesh goes on fitting a face that a board, a hand or another person slides over (it
predicts the hidden part), so the swap would be painted over the occluder (a *ghost*). The
whole-frame detector sees less of such a face and scores it lower: on the leak clip ``hidden``
0.81-0.84 in full view, 0.4-0.5 with 40-50 % of it hidden, 0.36 coming out from behind the
board. A followed face whose own detection this frame is weak (under the tracker's
``high_score_threshold``, the score a face needs to be followed at all) and well under its
best strong one earlier is withheld (``NO_MESH``: the cover at once, never the held swap), and
so is one large enough for the whole-frame detector whose own detection is weak and has never
been strong: a face first seen partly hidden, followed from a tile search (a tile scores a
face higher than the whole frame does: a stream starting at ``hidden``'s input frame 9, the
face 40 % under the board, 0.74 in its tile and 0.40 in the whole frame).
A frame where the detector misses the face altogether says nothing by itself (the detector
misses a face now and then): it stays swapped. While the first 20-30 % of a face is covered the
score stays over the threshold (0.72 and 0.64 on ``hidden``): a face whose look shows something
reaching in over it from a side (:mod:`livecam.analysis.occluders`) is withheld once its score
is :data:`SIDE_DROP` under its best, however strong it still is, and where the detector finds
no box on it at all (``hidden`` input frame 11, 60 % under the board, its mesh carried from
frame 8 still fitting: the detector's only box was a 0.37 one on its uncovered corner).
"""

from __future__ import annotations

from livecam.analysis.observations import SAME_FACE_IOU
from livecam.core.boxes import box_iou
from livecam.core.types import Faces


def own_scores(faces: Faces, detections: Faces) -> list[float | None]:
    """For each of ``faces``, the score of its best-overlapping detection (IoU at least
    :data:`~livecam.analysis.observations.SAME_FACE_IOU`) in ``detections`` (this frame's
    whole-frame detections, weak ones included), or None where none overlaps. In Python
    floats (the follower keeps the GIL: :mod:`livecam.analysis.keepgil`)."""
    scores = detections.scores.tolist()
    dets = detections.boxes_xyxy.tolist()
    out: list[float | None] = []
    for box in faces.boxes_xyxy.tolist():
        best, best_iou = None, SAME_FACE_IOU
        for det, score in zip(dets, scores, strict=True):
            iou = box_iou(box, det)
            if iou >= best_iou:
                best, best_iou = score, iou
        out.append(best)
    return out


#: A face is taken as partly hidden when its detection scores this much under its best strong
#: one (``hidden``: 0.84 in view, 0.36-0.5 with 40-50 % hidden), not only under the threshold:
#: a small face in a group hovers around it with sensor noise (t1's, 0.55-0.65).
SCORE_DROP = 0.2
#: A face that something advances over from a side (:mod:`livecam.analysis.occluders`) is
#: withheld when its detection scores this much under its best, however strong it still is
#: (``hidden``: 0.90 in view, 0.72 and 0.64 with 20 and 30 % of it covered as the board comes,
#: 0.62-0.71 with 30-20 % still covered as it goes).
SIDE_DROP = 0.15
#: A face at least this share of the frame's width across is one the whole-frame detector
#: finds reliably (160 px at 720p, :mod:`livecam.analysis.detect`): weak there and never strong
#: (found by a tile), it is partly hidden. Smaller faces may score weak all along (``still_6``'s
#: 113 px face: 0.42-0.47 in the whole frame, followed from its tile).
RELIABLE_WIDTH = 0.125


class PartlyHidden:
    """Which followed faces to withhold this frame: those whose own detection is weak now
    (under ``high_score``) and :data:`SCORE_DROP` under the best strong one earlier in their
    track's life, or with no strong one yet (a face :data:`RELIABLE_WIDTH` wide or wider);
    of those something advances over from a side, also those whose detection is
    :data:`SIDE_DROP` under it or missing. Only the follower's thread."""

    def __init__(self, high_score: float) -> None:
        self.high_score = high_score
        self._best: dict[int, float] = {}

    def update(self, faces: Faces, detections: Faces | None, known: set[int],
               advancing: set[int] | frozenset[int] = frozenset(), *,
               frame_width_px: int) -> list[int]:
        """Indices of ``faces`` to withhold; ``known``: the track ids still remembered
        (followed, lost or covered), the others are forgotten; ``advancing``: indices of
        ``faces`` that something advances over from a side (withheld at a drop of
        :data:`SIDE_DROP`, whatever their score, or where ``detections`` has no box on
        them). ``detections``: this frame's whole-frame detections, None where none were
        run (then nothing is withheld). ``frame_width_px``: the frame's width, for
        :data:`RELIABLE_WIDTH` (required: without it no face never strong could be withheld).
        """
        if frame_width_px <= 0:
            raise ValueError(f"frame_width_px must be positive, got {frame_width_px}")
        for tid in [t for t in self._best if t not in known]:
            del self._best[tid]
        if detections is None or not len(faces):
            return []
        out = []
        boxes = faces.boxes_xyxy.tolist()
        min_width = RELIABLE_WIDTH * frame_width_px
        for i, (tid, score) in enumerate(zip(faces.track_ids.tolist(),
                                             own_scores(faces, detections), strict=True)):
            if score is None:
                # no box on the face at all: by itself the detector missing a face now and
                # then; with something reaching in over it, the face is under it
                if i in advancing:
                    out.append(i)
                continue
            best = self._best.get(tid)
            if score >= self.high_score:
                self._best[tid] = score if best is None else max(score, best)
            elif best is None and boxes[i][2] - boxes[i][0] >= min_width:
                # weak now and never strong, though large enough for the whole-frame detector:
                # a face first seen partly hidden, found by a tile (which scores it higher)
                out.append(i)
                continue
            elif best is not None and score < best - SCORE_DROP:
                out.append(i)
                continue
            best = best or 0.0
            if i in advancing and score < best - SIDE_DROP:
                out.append(i)
        return out

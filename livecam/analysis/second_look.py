"""A second look at a face found at the frame's bottom edge, and where edge pictures come from.

The bottom edge strips are also searched with their last row repeated below them
(:func:`livecam.analysis.edges.edge_strips`): a face entering from below reads as one whose
lower half is hidden. That picture also made t1's glasses lying on the table at the bottom of
``still_6`` a face (0.63-0.73 on every frame, above the 0.5 such a hit needs), and the cover
hid a 288x89 px patch of table where no face was; a higher score would lose the faces sliding
in from below (0.47-0.78). So such a hit is taken only when the detector finds it again on a
second look: the frame about the hit at another scale (:func:`second_look_places`,
:func:`found_again`). A face is found again; what fooled the detector once mostly is not.

A steady false hit (the glasses, on every frame) would cost the second look's pictures on every
frame: :class:`Verdicts` keeps a place's verdict for a few frames while its pixels hold.

:class:`StripPlace` says where each pixel of such a picture comes from, so a device that holds
the frame builds it with two index selections (the strips' own pictures too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from livecam.core.boxes import box_iou
from livecam.core.types import Faces

#: A hit in the repeated rows is taken only when the detector finds it again on a second look
#: (:func:`seen_again`): square pictures :data:`SECOND_LOOK_PX` wide of the frame about the
#: hit, each of :data:`SECOND_LOOK_SPANS` times the hit's size across (the rows below the edge
#: repeated as before), must score :data:`SECOND_LOOK_SCORE` on average, each picture's score
#: the best of its detections whose box overlaps the hit's by :data:`SECOND_LOOK_IOU` (0 where
#: none does). Measured on the leak clips, raw and through their H.264 as livecam sees them
#: (36-60 frames each): t1's glasses lying on the table (``still_6``, 0.63-0.73 on every
#: frame, a 288x89 px cover on a face-free table) average 0.00-0.17 (no picture above 0.53,
#: at most two above 0.3: one span alone let them through on some frames); the faces of
#: ``slide_bottom`` from 32 % in view and ``cut_bottom`` 0.48-0.87; the t1 photo's other
#: people sliding in from below 0.38-0.90 from their first hits that matter. What it leaves
#: out of theirs (one picture of five finding the face, 0.10-0.17: the hair or forehead at
#: under 30 % in view) the mirrored strips cover, as before.
SECOND_LOOK_SPANS = (3.0, 4.0, 5.0, 2.5, 3.5)
SECOND_LOOK_PX = 192
SECOND_LOOK_SCORE = 0.3
#: ... its box overlapping the hit's this much (IoU).
SECOND_LOOK_IOU = 0.3


@dataclass(frozen=True)
class StripPlace:
    """Where each pixel of an :func:`~livecam.analysis.edges.edge_strips` picture (or a second
    look's) comes from: picture[i, j] = frame[``rows``[i], ``cols``[j]] (int64 frame indices,
    the mirror's included), and ``offset_xy`` as
    :attr:`~livecam.analysis.edges.EdgeStrip.offset_xy` (a second look's: times its scale).
    A device builds the picture from a frame it holds with two index selections: nothing is
    written on the host, nothing uploaded."""

    rows: np.ndarray  # (ph,) int64
    cols: np.ndarray  # (pw,) int64
    offset_xy: np.ndarray  # (2,) float32
    #: as :attr:`~livecam.analysis.edges.EdgeStrip.repeated_below`
    repeated_below: int | None = None
    #: False for a picture made once (:func:`second_look_places`): a device does not keep
    #: its indices (they would pile up, one pair for each place a hit was found)
    kept: bool = True


def second_look_places(box: Sequence[float], height_px: int, width_px: int,
                       ) -> list[tuple[StripPlace, float]]:
    """The pictures of a second look at a hit ``box`` (x1, y1, x2, y2, frame px) in an
    (H, W) frame: for each of :data:`SECOND_LOOK_SPANS`, a :data:`SECOND_LOOK_PX` square
    centred on the box, that many times its larger side across, as frame indices (nearest
    pixel; beyond the frame the edge's rows and columns repeat, as in the bottom's repeated
    pictures), with its scale: frame px = picture px * scale + ``offset_xy``."""
    x1, y1, x2, y2 = (float(v) for v in box)
    cx, cy, side = 0.5 * (x1 + x2), 0.5 * (y1 + y2), max(x2 - x1, y2 - y1, 1.0)
    n = SECOND_LOOK_PX
    out = []
    for span in SECOND_LOOK_SPANS:
        scale = span * side / n
        x0, y0 = cx - 0.5 * span * side, cy - 0.5 * span * side
        at = (np.arange(n, dtype=np.float64) + 0.5) * scale
        rows = np.clip(np.floor(y0 + at), 0, height_px - 1).astype(np.int64)
        cols = np.clip(np.floor(x0 + at), 0, width_px - 1).astype(np.int64)
        out.append((StripPlace(rows, cols, np.array([x0, y0], np.float32), kept=False), scale))
    return out


def score_again(faces: Faces, box: Sequence[float], offset_xy: np.ndarray,
                scale: float) -> float:
    """The best score of ``faces`` (detections in a :func:`second_look_places` picture,
    picture px) whose box, in frame px, overlaps ``box`` by :data:`SECOND_LOOK_IOU`; 0.0
    where none does."""
    dx, dy = (float(v) for v in offset_xy.tolist())
    target = [float(v) for v in box]
    best = 0.0
    for row, score in zip(faces.boxes_xyxy.tolist(), faces.scores.tolist(), strict=True):
        mapped = [row[0] * scale + dx, row[1] * scale + dy, row[2] * scale + dx,
                  row[3] * scale + dy]
        if score > best and box_iou(mapped, target) >= SECOND_LOOK_IOU:
            best = float(score)
    return best


def seen_again(detect: Callable[[StripPlace], Faces], box: Sequence[float], height_px: int,
               width_px: int, *,
               detect_all: Callable[[list[StripPlace]], list[Faces] | None] | None = None
               ) -> bool:
    """Whether the hit ``box`` (frame px) of an (H, W) frame is found again: ``detect``
    (the detector on the picture a :class:`StripPlace` describes, picture px) on each of
    :func:`second_look_places` scores :data:`SECOND_LOOK_SCORE` on average
    (:func:`score_again`). Stops as soon as the average is decided (scores are at most 1):
    a face scoring 0.6 is taken after three pictures, a pattern found in none left out after
    four. ``detect_all`` (networks that detect several pictures in one call for about the
    cost of one: the GPU's) detects every picture in one call first (None from it: ``detect``
    each); the verdict is the same."""
    places = second_look_places(box, height_px, width_px)
    found = detect_all([place for place, _ in places]) if detect_all is not None else None
    need = SECOND_LOOK_SCORE * len(places)
    total = 0.0
    for k, (place, scale) in enumerate(places):
        faces = found[k] if found is not None else detect(place)
        total += score_again(faces, box, place.offset_xy, scale)
        if total >= need:
            return True
        if total + (len(places) - k - 1) < need:
            return False
    return False


#: A second look's verdict on a place is kept for this many frames searched while the place's
#: pixels hold (:class:`Verdicts`): t1's glasses on the table, a hit on every frame of
#: ``still_6``, cost the second look's pictures once instead of on every frame.
VERDICT_FRAMES = 8
#: ... for a hit whose box overlaps the one judged this much (IoU) ...
VERDICT_IOU = 0.5
#: ... and the place watched for a change is the hit's box grown to this many times its size
#: (the second look's smallest picture): a face moving in changes it.
VERDICT_SPAN = 2.5


@dataclass(slots=True)
class _Verdict:
    box: list[float]  # the hit judged, frame px
    place: np.ndarray  # (4,) float32: the place watched for a change
    picture: np.ndarray  # its thumbnail when judged
    seen: bool
    frame: int


class Verdicts:
    """Second-look verdicts by place, for :data:`VERDICT_FRAMES` frames (see there): a
    verdict is dropped when the place's pixels change (:func:`livecam.analysis.returning.
    changed`: a face moving in), so a face is never left out on an older look at an empty
    place. Only the follower's thread."""

    def __init__(self, frames: int = VERDICT_FRAMES) -> None:
        self.frames = frames
        self._frame = 0
        self._kept: list[_Verdict] = []

    def next_frame(self) -> None:
        """A new frame is searched: verdicts older than :attr:`frames` go."""
        self._frame += 1
        self._kept = [v for v in self._kept if self._frame - v.frame < self.frames]

    def seen_again(self, image_bgr: np.ndarray, box: Sequence[float],
                   judge: Callable[[], bool]) -> bool:
        """The verdict on the hit ``box`` (frame px) in ``image_bgr``: a kept one on the same
        place whose pixels have not changed, else ``judge()`` (kept for later frames)."""
        from livecam.analysis.returning import changed, thumbnail

        target = [float(v) for v in box]
        for v in self._kept:
            if box_iou(v.box, target) >= VERDICT_IOU:
                # the place as it was judged (a hit's box moves by a pixel or two from frame
                # to frame, and so would a place of its own across sharp edges)
                now = thumbnail(image_bgr, v.place)
                if now is not None and not changed(v.picture, now):
                    return v.seen
                self._kept.remove(v)
                break
        seen = judge()
        place = np.array(_grown(target, VERDICT_SPAN), np.float32)
        picture = thumbnail(image_bgr, place)
        if picture is not None:
            self._kept.append(_Verdict(target, place, picture, seen, self._frame))
        return seen


def _grown(box: list[float], times: float) -> list[float]:
    cx, cy = 0.5 * (box[0] + box[2]), 0.5 * (box[1] + box[3])
    hw, hh = 0.5 * times * (box[2] - box[0]), 0.5 * times * (box[3] - box[1])
    return [cx - hw, cy - hh, cx + hw, cy + hh]

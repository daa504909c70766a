"""Where a face was hidden for longer than its cover lasts: watched, and covered when it changes.

A lost face is covered where the tracker predicts it for ``advanced.analysis.lost_cover_frames``
(:class:`~livecam.analysis.memory.HiddenFaces`); then its cover ends, so that no patch lingers on
what hides it. A face hidden longer than that (the ``hidden`` leak clip: 38 frames behind a
board) came back out showing its real side: at 10-20 % in view the detector does not find it
(``hidden`` input frames 55-56, residual 0.00), and searching harder does not help. The
detector on crops about the face's last place, 1.5-3 times its size, scored the sliver 0.23-0.33
and the board alone, before the face was there, 0.34-0.62: no score tells them apart.

What does tell them apart is that the place changed. So when a lost face's cover expires (its
box at least a quarter in the frame), :class:`ReturnWatch` keeps a small grey picture of its
place (:data:`THUMB_PX` square) for :data:`WATCH_S` seconds. While what hides the face stays
still, nothing is covered; from the first frame the place differs from that picture
(:func:`changed`: :data:`CHANGED_SHARE` of its cells by :data:`CHANGED_LEVELS` grey levels,
after taking out the change common to the whole place, as an exposure change makes it), the
whole place is covered (withheld ``LOST``, no track: no held swap is painted there) until a face
swapped this frame stands on it (:func:`on_place`: the face is back and followed) or the watch
ends. Its cost is one resize of the place a frame per watched place (about 0.1 ms).

The price: where the hidden face does not come back but the place changes (the board moves away
with no one behind it, someone else walks through), a blurred patch shows there until the watch
ends or a face swapped there ends it; and a face that comes back but is never followed (a sliver
that stays a sliver) is covered only until the watch ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from livecam.core.boxes import box_iou
from livecam.core.types import ImageBGR, Unswappable, WithheldFaces

#: Seconds a place is watched after its lost face's cover expired.
WATCH_S = 4.0
#: The watched picture's side (px): the place's grey levels averaged in cells this many across.
THUMB_PX = 24
#: A cell has changed when its grey level moved this much (0-255), beyond the change common
#: to the whole place (the median). Sensor noise (sigma 2) averaged over a cell moves it by
#: well under 1; a face's sliver on a board by tens.
CHANGED_LEVELS = 16.0
#: ... and the place has changed when this share of its cells did (``hidden``: the face's first
#: 10 % in view, 18 px of a 287 px place, is about 6 % of it).
CHANGED_SHARE = 0.02
#: A lost face whose cover expired where a place is watched already (IoU) is that place (the
#: tracker keeps a lost track a while longer, and it expires again on every frame).
SAME_PLACE_IOU = 0.5
#: A face swapped this frame with this share of its box in a watched place ends the watch.
ON_PLACE_SHARE = 0.5


def thumbnail(image_bgr: ImageBGR, box: np.ndarray) -> np.ndarray | None:
    """(THUMB_PX, THUMB_PX) float32 grey levels of ``box`` (4,) clipped to ``image_bgr``;
    None when too little of it is in the frame to watch."""
    h, w = image_bgr.shape[:2]
    x1, y1 = max(0, int(box[0])), max(0, int(box[1]))
    x2, y2 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    if x2 - x1 < 8 or y2 - y1 < 8:
        return None
    grey = cv2.cvtColor(image_bgr[y1:y2, x1:x2], cv2.COLOR_BGR2GRAY)
    small = cv2.resize(grey, (THUMB_PX, THUMB_PX), interpolation=cv2.INTER_AREA)
    return small.astype(np.float32)


def changed(before: np.ndarray, now: np.ndarray) -> bool:
    """True when at least :data:`CHANGED_SHARE` of the cells of ``now`` differ from ``before``
    (both :func:`thumbnail` pictures) by :data:`CHANGED_LEVELS`, beyond their median change."""
    diff = now - before
    diff -= float(np.median(diff))
    return float(np.mean(np.abs(diff) >= CHANGED_LEVELS)) >= CHANGED_SHARE


def on_place(face_box: np.ndarray, place: np.ndarray) -> bool:
    """True when at least :data:`ON_PLACE_SHARE` of ``face_box`` lies in ``place``."""
    iw = min(float(face_box[2]), float(place[2])) - max(float(face_box[0]), float(place[0]))
    ih = min(float(face_box[3]), float(place[3])) - max(float(face_box[1]), float(place[1]))
    area = max((float(face_box[2]) - float(face_box[0]))
               * (float(face_box[3]) - float(face_box[1])), 1e-6)
    return iw > 0 and ih > 0 and iw * ih >= ON_PLACE_SHARE * area


@dataclass(slots=True)
class _Place:
    box_xyxy: np.ndarray  # (4,) float32 px: where the lost face's cover was last drawn
    picture: np.ndarray  # its thumbnail when the cover expired
    until: int  # the last frame index it is watched
    covered: bool = False  # it changed: covered from then on


class ReturnWatch:
    """The places of lost faces whose cover expired (see the module docstring). Only the
    follower's thread."""

    def __init__(self, fps: float) -> None:
        self.frames = max(1, round(WATCH_S * fps))
        self._places: list[_Place] = []

    @property
    def watching(self) -> int:
        """How many places are watched."""
        return len(self._places)

    def update(self, image_bgr: ImageBGR, index: int, expired: list[np.ndarray],
               swapped: np.ndarray) -> WithheldFaces:
        """Start watching the ``expired`` boxes (lost faces whose cover ended this frame),
        end the watches that are over or that a face in ``swapped`` (N, 4) stands on, and
        return the places to cover in frame ``index`` (withheld ``LOST``, track id -1)."""
        for box in expired:
            if any(box_iou(box.tolist(), p.box_xyxy.tolist()) >= SAME_PLACE_IOU
                   for p in self._places):
                continue
            picture = thumbnail(image_bgr, box)
            if picture is not None:
                self._places.append(_Place(np.asarray(box, np.float32).copy(), picture,
                                           index + self.frames))
        faces = swapped.tolist()
        kept: list[_Place] = []
        for place in self._places:
            if index > place.until or any(on_place(np.asarray(f), place.box_xyxy)
                                          for f in faces):
                continue
            kept.append(place)
            if not place.covered:
                now = thumbnail(image_bgr, place.box_xyxy)
                place.covered = now is not None and changed(place.picture, now)
        self._places = kept
        boxes = [p.box_xyxy for p in kept if p.covered]
        if not boxes:
            return WithheldFaces()
        n = len(boxes)
        return WithheldFaces(np.stack(boxes).astype(np.float32),
                             np.full((n, 0, 2), np.nan, np.float32),
                             np.full(n, -1, np.int64),
                             np.full(n, Unswappable.LOST, np.uint8))

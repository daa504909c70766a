"""What the face follower remembers of faces it does not see in a frame, so they stay covered.

- :class:`HiddenFaces`: faces lost from view (hidden, turned away, a detector miss), covered
  where the tracker predicts them until ``advanced.analysis.lost_cover_frames`` frames have passed
  since they were last seen, or since the last weak detection inside (a half-hidden face
  scores too low to be followed, yet half of it is on screen).
- :class:`BoxOnlyMemory`: faces too small for the whole-frame detector that are not followed
  (beyond ``max_faces``, or no mesh): a tile finds them only now and then, so they are
  covered where last found until two tile searches in a row that would have found them
  there do not.

Both are owned by one :class:`~livecam.analysis.follower.FaceFollower` (pipeline thread).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from livecam.analysis.detect import SearchResult
from livecam.analysis.observations import (
    Observation,
    grown,
    inside_any,
    moved_marks,
    overlaps,
    refuted,
)
from livecam.core.boxes import share_in_frame
from livecam.core.types import Unswappable, WithheldFaces
from livecam.track.bytetrack import LostTrack

# A lost face's box grows by this fraction of its size per frame unseen (it may have moved off
# the predicted path), up to _LOST_GROWTH_MAX.
_LOST_GROWTH = 0.04
_LOST_GROWTH_MAX = 0.5
# A weak detection inside a lost face's box grown by this fraction keeps that face covered.
_EVIDENCE_MARGIN = 0.2
# A weak detection with at least this share of its box in a lost face's box grown by
# _EVIDENCE_MARGIN is that face coming back out (from behind someone, a board) and is covered
# too: where the tracker predicts a hidden face lags where it comes out when its speed was
# still being learnt (crossing, every 8th frame: 100 px short, the face found at 0.43).
_EMERGING_SHARE = 0.25
# ... unless this share of it is under that face's own cover already (the face itself, seen
# weakly where it is covered: one cover is enough).
_UNDER_COVER = 0.9
# A lost face is covered while at least this share of its box is in the frame: the leak
# measure calls a face visible from half of it on screen, and the prediction of a face walking
# out may run ahead of it (a face that left waits at the edge, half inside: covered for
# lost_cover_frames).
_LOST_IN_FRAME = 0.25


@dataclass(slots=True)
class HiddenFace:
    """A lost face: ``box_xyxy`` (4,) px where it is covered, its last raw ``marks`` (K, 2)
    if it had a mesh, ``last_index`` the frame it was last seen (or a weak detection inside
    was), ``followed``: it held one of the ``max_faces`` places."""

    box_xyxy: np.ndarray
    marks: np.ndarray | None
    last_index: int
    followed: bool


class HiddenFaces:
    """Lost faces still covered, by track id (see the module docstring)."""

    def __init__(self, cover_frames: int) -> None:
        self.cover_frames = cover_frames
        self._faces: dict[int, HiddenFace] = {}
        #: where the lost faces whose cover ended in the last :meth:`update` were last covered
        #: (boxes (4,), at least :data:`_LOST_IN_FRAME` in the frame):
        #: :class:`~livecam.analysis.returning.ReturnWatch` watches those places
        self.expired: list[np.ndarray] = []

    @property
    def ids(self) -> set[int]:
        return set(self._faces)

    def unseen(self, index: int) -> dict[int, int]:
        """Input frames since each lost face was last seen (or a weak detection inside), by
        track id, at frame ``index``."""
        return {tid: index - f.last_index for tid, f in self._faces.items()}

    def holders(self, *, exclude: set[int]) -> list[np.ndarray]:
        """Boxes of lost faces that were followed (they keep their place), but ``exclude``."""
        return [f.box_xyxy for tid, f in self._faces.items()
                if f.followed and tid not in exclude]

    def update(self, lost: Sequence[LostTrack], marks: dict[int, np.ndarray],
               size: tuple[int, int], index: int, alive: set[int], weak: np.ndarray,
               seen: list[np.ndarray],
               followed: list[np.ndarray] | None = None) -> WithheldFaces:
        """Take this frame's lost tracks (``marks``: each track's last raw landmarks), drop
        faces followed or found again (``alive`` ids, ``seen`` boxes), refresh those a
        ``weak`` (M, 4) detection shows, expire the rest; the ones to cover, withheld LOST,
        and with them (LOST, no track) the weak detections partly on a lost face's box that
        are no face ``followed`` (boxes (4,) of the faces swapped this frame): the lost face
        coming back out where its tracker did not predict it."""
        w, h = size
        emerging: set[int] = set()  # indices into weak
        self.expired = []
        for lt in lost:
            entry = self._faces.get(lt.track_id)
            last_seen = index - lt.frames_lost
            if entry is None:
                self._faces[lt.track_id] = HiddenFace(lt.box_xyxy, marks.get(lt.track_id),
                                                      last_seen, lt.track_id in marks)
            else:
                entry.box_xyxy = lt.box_xyxy  # the tracker's prediction, while it has one
                entry.last_index = max(entry.last_index, last_seen)
        out = []
        for tid, entry in list(self._faces.items()):
            if tid in alive or overlaps(entry.box_xyxy, seen):
                del self._faces[tid]  # followed again, or found again under a new id
                continue
            near = grown(entry.box_xyxy, _EVIDENCE_MARGIN)
            if inside_any(weak, near):
                entry.last_index = index
            since = index - entry.last_index
            in_frame = share_in_frame(entry.box_xyxy.tolist(), w, h) >= _LOST_IN_FRAME
            box = grown(entry.box_xyxy, min(_LOST_GROWTH * min(since, self.cover_frames),
                                            _LOST_GROWTH_MAX))
            if since > self.cover_frames:
                del self._faces[tid]
                if in_frame:
                    self.expired.append(box)
                continue
            if not in_frame:
                continue
            emerging.update(j for j in range(len(weak)) if j not in emerging
                            and inside_any(weak[j:j + 1], near, _EMERGING_SHARE)
                            and not inside_any(weak[j:j + 1], box, _UNDER_COVER)
                            and not overlaps(weak[j], followed or []))
            moved = (moved_marks(entry.marks, entry.box_xyxy)[None] if entry.marks is not None
                     else np.full((1, 0, 2), np.nan, np.float32))
            # (both float32 already, and new: copy=False spares a copy, which lets numpy go
            # of the GIL)
            out.append(WithheldFaces(box[None].astype(np.float32, copy=False),
                                     moved.astype(np.float32, copy=False),
                                     np.array([tid], np.int64),
                                     np.array([Unswappable.LOST], np.uint8)))
        if emerging:  # no track: the lost face's held swap is never drawn on them
            n = len(emerging)
            out.append(WithheldFaces(weak[sorted(emerging)].astype(np.float32),
                                     np.full((n, 0, 2), np.nan, np.float32),
                                     np.full(n, -1, np.int64),
                                     np.full(n, Unswappable.LOST, np.uint8)))
        return WithheldFaces.concat(out)


# A remembered box-only face is let go after this many tile searches in a row over it that
# did not find it: the detector misses a small face now and then (t1's smallest, in one
# search of several), and the next search of that tile comes tens of frames later.
_MISSES_TO_DROP = 2


@dataclass(slots=True)
class BoxOnly:
    """A face that is not followed, remembered where a tile search last found it;
    ``misses``: searches over it since that did not find it."""

    box_xyxy: np.ndarray
    score: float
    reason: Unswappable
    misses: int = 0


class BoxOnlyMemory:
    """Box-only faces a tile search found, kept until refuted (twice in a row: no age limit,
    the tile search comes round every few tens of frames and decides)."""

    def __init__(self) -> None:
        self._faces: list[BoxOnly] = []

    def update(self, fresh: list[tuple[Observation, bool]], seen: list[np.ndarray],
               searched: SearchResult | None) -> list[Observation]:
        """Remember this frame's box-only observations marked to keep (found by a tile
        search: the whole-frame pass looks again next frame anyway); return the ones
        remembered from earlier that nothing ``seen`` now repeats and no search refuted."""
        boxes = seen + [o.box_xyxy for o, _ in fresh]
        older = []
        for old in self._faces:
            if overlaps(old.box_xyxy, boxes):
                continue
            if searched is not None and refuted(old.box_xyxy, searched):
                old.misses += 1
                if old.misses >= _MISSES_TO_DROP:
                    continue
            older.append(old)
        self._faces = [BoxOnly(o.box_xyxy, o.score, o.reason)
                       for o, keep in fresh if keep] + older
        return [Observation(b.box_xyxy, b.score, reason=b.reason) for b in older]

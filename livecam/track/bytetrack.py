"""ByteTrack (Zhang et al., ECCV 2022) on numpy + scipy's Hungarian solver.

Each :meth:`ByteTracker.update`: predict every track with the Kalman filter; match confident
detections to tracked and lost tracks (IoU, optionally times score); match weak detections to
the tracked ones still unmatched; confirm or drop tracks born last frame; let a confident
leftover close to a track lost in this very update continue it (a jump too far for boxes to
overlap); start tracks from confident leftovers; forget tracks lost for longer than the
buffer. Ids count from 1 per tracker instance. The tracker never writes into its inputs; it
returns a new result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
from scipy.optimize import linear_sum_assignment

from livecam.core.boxes import box_iou
from livecam.core.types import FloatArray, IntArray
from livecam.track.kalman import KalmanBoxFilter, xyxy_to_xyah
from livecam.track.settings import ByteTrackSettings


class TrackState(Enum):
    TRACKED = 1
    LOST = 2
    REMOVED = 3


@dataclass(eq=False)
class _Track:
    track_id: int
    mean: np.ndarray
    cov: np.ndarray
    score: float
    start_frame: int
    last_frame: int
    state: TrackState = TrackState.TRACKED
    confirmed: bool = False
    det_index: int = -1
    emitted: bool = False

    def box(self) -> tuple[float, float, float, float]:
        """The Kalman box x1 y1 x2 y2 px as plain floats: one box through numpy's (N, 4)
        path costs ~30x more per call, and a list of tuples makes an (N, 4) array at once."""
        x, y, a, h = self.mean[:4].tolist()
        half_w, half_h = 0.5 * a * h, 0.5 * h
        return (x - half_w, y - half_h, x + half_w, y + half_h)


def _rows(rows: list[list[float]], which: list[int]) -> np.ndarray:
    """(len(which), 4) float64 boxes picked from ``rows``: a gather would let go of the GIL."""
    return np.array([rows[i] for i in which], np.float64).reshape(-1, 4)


def _boxes(tracks: Sequence[_Track]) -> np.ndarray:
    """(T, 4) float64 Kalman boxes of ``tracks``."""
    return np.array([t.box() for t in tracks]).reshape(-1, 4)


@dataclass(frozen=True, slots=True)
class TrackResult:
    """Tracks alive after one update (M of them), each matched to a detection this frame.

    ``track_ids`` (M,) int64; ``det_indices`` (M,) int64 index into the detections passed to
    ``update``; ``boxes_xyxy`` (M, 4) float32 Kalman-filtered boxes; ``is_new`` (M,) bool, true
    on the frame a track is confirmed (its first output).

    ``pending_track_ids`` (P,) int64 and ``pending_det_indices`` (P,) int64: tracks born this
    frame, not output until a detection confirms them next frame. A caller that does not
    detect every frame must observe these faces next frame (e.g. from their own landmarks), or
    they are dropped unconfirmed and a face entering while others are followed is never picked
    up.
    """

    track_ids: IntArray
    det_indices: IntArray
    boxes_xyxy: FloatArray
    is_new: np.ndarray
    pending_track_ids: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    pending_det_indices: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.track_ids)


@dataclass(frozen=True, slots=True)
class LostTrack:
    """A track not matched in the latest update, still waiting to come back: its Kalman
    ``box_xyxy`` (4,) float32 px predicted for that frame and ``frames_lost`` (>= 1) since it
    was last matched."""

    track_id: int
    box_xyxy: FloatArray
    frames_lost: int


# Up to this many box pairs, IoUs on plain floats (box_iou) cost less than numpy's ~20 ufunc
# calls on (N, M) arrays; beyond, numpy's fixed cost is spread over enough pairs to win.
PAIRS_IN_PYTHON = 10


def iou_matrix(a_xyxy: np.ndarray, b_xyxy: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) float64 IoU of boxes given as (N, 4) x1 y1 x2 y2."""
    a, b = _float_boxes(a_xyxy), _float_boxes(b_xyxy)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    # tolist of float32 gives the float64 values a cast would: no cast (see _float_boxes)
    a_rows, b_rows = a.tolist(), b.tolist()
    if len(a) * len(b) <= PAIRS_IN_PYTHON:
        return np.array([[box_iou(row, col) for col in b_rows] for row in a_rows])
    return iou_matrix_numpy(np.array(a_rows).reshape(-1, 4), np.array(b_rows).reshape(-1, 4))


def _float_boxes(boxes: object) -> np.ndarray:
    """``boxes`` as an (N, 4) float array, float32 left as it is: numpy's cast to float64
    lets go of the GIL (a hand-over among the streams' threads), and a few boxes are read as
    Python floats anyway, which hold a float32's value exactly."""
    a = np.asarray(boxes)
    if a.dtype != np.float32:
        a = a.astype(np.float64, copy=False)
    return a.reshape(-1, 4)


def iou_matrix_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`iou_matrix` of (N, 4) and (M, 4) float64 arrays (N, M > 0) in numpy."""
    # both coordinates of a corner per call (the same elementwise operations as one call per
    # coordinate, in half the calls); np.maximum, not np.clip: clip's wrapper costs more
    wh = np.maximum(np.minimum(a[:, None, 2:], b[None, :, 2:])
                    - np.maximum(a[:, None, :2], b[None, :, :2]), 0.0)
    inter = wh[..., 0] * wh[..., 1]
    size_a = np.maximum(a[:, 2:] - a[:, :2], 0.0)
    size_b = np.maximum(b[:, 2:] - b[:, :2], 0.0)
    union = (size_a[:, 0] * size_a[:, 1])[:, None] + (size_b[:, 0] * size_b[:, 1])[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def _assign(similarity: np.ndarray, min_similarity: float,
            ) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Hungarian matching maximising similarity; pairs below ``min_similarity`` are refused."""
    rows, cols = similarity.shape
    if rows == 0 or cols == 0:
        return [], list(range(rows)), list(range(cols))
    if rows == 1 and cols == 1:  # one face, the usual case: no solver needed
        if similarity[0, 0] >= min_similarity:
            return [(0, 0)], [], []
        return [], [0], [0]
    # Faces apart (the usual case): no row or column with two acceptable partners. Those pairs
    # are then the solver's (any assignment without one costs 1e6 more), in its (row) order.
    acceptable = [[j for j, v in enumerate(row) if v >= min_similarity]
                  for row in similarity.tolist()]
    pairs = [(i, js[0]) for i, js in enumerate(acceptable) if js]
    if any(len(js) > 1 for js in acceptable) or len({j for _, j in pairs}) < len(pairs):
        cost = np.where(similarity >= min_similarity, 1.0 - similarity, 1e6)
        r, c = linear_sum_assignment(cost)
        pairs = [(int(i), int(j)) for i, j in zip(r, c, strict=True) if cost[i, j] < 1e5]
    used_r = {i for i, _ in pairs}
    used_c = {j for _, j in pairs}
    return pairs, [i for i in range(rows) if i not in used_r], [
        j for j in range(cols) if j not in used_c]


def _stop_at_edge(tracks: list[_Track], frame_size_px: tuple[int, int]) -> None:
    """Hold lost tracks whose centre has left the frame at the edge, without velocity.

    A face that walks out is not moving on behind the frame's edge: when it comes back it
    enters where it left. Without this, its lost track drifts on with the velocity it left
    with and the returning face (IoU 0 with that drifted box) gets a new id.
    """
    w, h = frame_size_px
    for t in tracks:
        cx, cy = t.mean[0], t.mean[1]
        if 0.0 <= cx <= w and 0.0 <= cy <= h:
            continue
        t.mean = t.mean.copy()
        t.mean[0] = min(max(cx, 0.0), float(w))
        t.mean[1] = min(max(cy, 0.0), float(h))
        t.mean[4:8] = 0.0


class ByteTracker:
    """Multi-object tracker over boxes with scores. Only one thread may call :meth:`update`."""

    def __init__(self, settings: ByteTrackSettings | None = None) -> None:
        self.settings = settings or ByteTrackSettings()
        self._kf = KalmanBoxFilter(
            position_noise_weight=self.settings.kalman_position_noise_weight,
            velocity_noise_weight=self.settings.kalman_velocity_noise_weight)
        self._tracked: list[_Track] = []
        self._lost: list[_Track] = []
        self._frame = 0
        self._next_id = 1

    def reset(self) -> None:
        """Forget every track; ids start again at 1."""
        self._tracked, self._lost = [], []
        self._frame = 0
        self._next_id = 1

    @property
    def has_live_tracks(self) -> bool:
        """True while any track is tracked (matched in the latest frame)."""
        return any(t.state is TrackState.TRACKED for t in self._tracked)

    def predicted_boxes(self) -> dict[int, np.ndarray]:
        """Current Kalman box (4,) px of every tracked or lost track, by id (no prediction step)."""
        return {t.track_id: np.array(t.box()) for t in self._tracked + self._lost}

    def lost_tracks(self) -> list[LostTrack]:
        """Tracks lost as of the latest update (confirmed ones only), oldest id first."""
        return [LostTrack(t.track_id, np.array(t.box(), np.float32),
                          self._frame - t.last_frame)
                for t in sorted(self._lost, key=lambda t: t.track_id) if t.confirmed]

    def velocities_px(self) -> dict[int, tuple[float, float]]:
        """Kalman centre velocity (px per frame, not per update) of tracked tracks, by id."""
        return {t.track_id: (float(t.mean[4]), float(t.mean[5])) for t in self._tracked}

    def update(self, boxes_xyxy: np.ndarray, scores: np.ndarray, *,
               frame_size_px: tuple[int, int] | None = None, steps: int = 1) -> TrackResult:
        """Advance to the next frame given, with its detections: (N, 4) px boxes, (N,) scores.

        ``frame_size_px`` (width, height): where given, a lost track whose predicted centre
        leaves the frame stops at the frame's edge (see ``stop_lost_tracks_at_frame_edge``).
        ``steps``: frames since the previous update (a live pipeline under load skips frames:
        the motion model predicts that many frames ahead, and the lost-track buffer counts
        frames, not updates).
        """
        s = self.settings
        # Python floats (the numpy paths' float64 arrays are made from them: see _rows)
        rows = _float_boxes(boxes_xyxy).tolist()
        score_list = [float(v) for v in np.asarray(scores).reshape(-1).tolist()]
        if len(rows) != len(score_list):
            raise ValueError(f"{len(rows)} boxes but {len(score_list)} scores")
        steps = max(1, int(steps))
        first = self._frame == 0
        self._frame += steps
        frame = self._frame
        # Python floats (float64, the same bits: rows and score_list) for the per-detection
        # work: a handful of detections costs less in plain Python than in numpy's per-call
        # overhead
        high = [i for i, v in enumerate(score_list) if v >= s.high_score_threshold]
        low = [i for i, v in enumerate(score_list)
               if s.low_score_threshold <= v < s.high_score_threshold]
        for t in self._tracked + self._lost:
            t.det_index = -1

        unconfirmed = [t for t in self._tracked if not t.confirmed]
        confirmed = [t for t in self._tracked if t.confirmed]
        pool = confirmed + self._lost
        self._predict(pool + unconfirmed, steps)
        if frame_size_px is not None and s.stop_lost_tracks_at_frame_edge:
            _stop_at_edge(self._lost, frame_size_px)

        def similarity(tracks: list[_Track], det_idx: list[int]) -> np.ndarray:
            if not tracks or not det_idx:
                return np.zeros((len(tracks), len(det_idx)))
            if len(tracks) * len(det_idx) <= PAIRS_IN_PYTHON:  # the same bits, see box_iou
                weight = [score_list[d] if s.fuse_detection_score else 1.0 for d in det_idx]
                return np.array([[box_iou(box, rows[d]) * w
                                  for d, w in zip(det_idx, weight, strict=True)]
                                 for box in (t.box() for t in tracks)])
            sim = iou_matrix_numpy(_boxes(tracks), _rows(rows, det_idx))
            if s.fuse_detection_score:
                sim = sim * np.array([score_list[d] for d in det_idx])[None, :]
            return sim

        def apply(track: _Track, det: int) -> None:
            track.mean, track.cov = self._kf.update(track.mean, track.cov,
                                                    xyxy_to_xyah(rows[det]))
            track.state = TrackState.TRACKED
            track.confirmed = True
            track.score = score_list[det]
            track.last_frame = frame
            track.det_index = det

        # First association: confident detections with tracked and lost tracks.
        pairs, free_tracks, free_high = _assign(similarity(pool, high),
                                                s.first_association_min_iou)
        for ti, di in pairs:
            apply(pool[ti], high[di])
        # Second association: weak detections with tracks still tracked and unmatched.
        rest = [pool[i] for i in free_tracks if pool[i].state is TrackState.TRACKED]
        pairs2, free_rest, _ = _assign(iou_matrix(_boxes(rest), _rows(rows, low))
                                       if rest and low else np.zeros((len(rest), 0)),
                                       s.second_association_min_iou)
        for ti, di in pairs2:
            apply(rest[ti], low[di])
        for i in free_rest:
            rest[i].state = TrackState.LOST
        # Tracks born last frame: confirmed by a confident leftover, else dropped.
        left_high = [high[i] for i in free_high]
        pairs3, free_unconf, free_left = _assign(similarity(unconfirmed, left_high),
                                                 s.unconfirmed_association_min_iou)
        for ti, di in pairs3:
            apply(unconfirmed[ti], left_high[di])
        for i in free_unconf:
            unconfirmed[i].state = TrackState.REMOVED
        # Recovery: a confident leftover close to a track lost in this very update continues
        # it (a jump too big for boxes to overlap: fast motion, or frames skipped under load).
        just_lost = [rest[i] for i in free_rest]
        leftover = [left_high[i] for i in free_left]
        pairs4, _, free_left4 = _assign(self._closeness(just_lost, _rows(rows, leftover)), 1e-6)
        for ti, di in pairs4:
            apply(just_lost[ti], leftover[di])
        # New tracks from confident detections nobody claimed.
        born: list[_Track] = []
        for di in [leftover[i] for i in free_left4]:
            if score_list[di] < s.new_track_score_threshold:
                continue
            mean, cov = self._kf.initiate(xyxy_to_xyah(rows[di]))
            born.append(_Track(self._next_id, mean, cov, score_list[di], frame, frame,
                               confirmed=first, det_index=di))
            self._next_id += 1

        everyone = confirmed + unconfirmed + self._lost + born
        for t in everyone:
            if t.state is TrackState.LOST and frame - t.last_frame > s.lost_track_buffer_frames:
                t.state = TrackState.REMOVED
        self._tracked = [t for t in everyone if t.state is TrackState.TRACKED]
        self._lost = [t for t in everyone if t.state is TrackState.LOST]
        self._drop_duplicates()
        out = [t for t in self._tracked if t.confirmed]
        pending = [t for t in self._tracked if not t.confirmed]
        is_new = np.array([not t.emitted for t in out], bool)
        for t in out:
            t.emitted = True
        return TrackResult(
            track_ids=np.array([t.track_id for t in out], np.int64),
            det_indices=np.array([t.det_index for t in out], np.int64),
            boxes_xyxy=np.array([t.box() for t in out], np.float32).reshape(-1, 4),
            is_new=is_new,
            pending_track_ids=np.array([t.track_id for t in pending], np.int64),
            pending_det_indices=np.array([t.det_index for t in pending], np.int64),
        )

    def _closeness(self, tracks: list[_Track], boxes: np.ndarray) -> np.ndarray:
        """(T, D) in [0, 1]: 1 - centre distance / (``recover_max_distance`` x box height),
        0 beyond that or where the sizes differ by more than half (not the same face)."""
        limit = self.settings.recover_max_distance
        if not tracks or len(boxes) == 0 or limit <= 0:
            return np.zeros((len(tracks), len(boxes)))
        tb = _boxes(tracks)
        tc, dc = (tb[:, :2] + tb[:, 2:]) / 2, (boxes[:, :2] + boxes[:, 2:]) / 2
        th, dh = tb[:, 3] - tb[:, 1], boxes[:, 3] - boxes[:, 1]
        dist = np.linalg.norm(tc[:, None] - dc[None], axis=2)
        scale = np.maximum(th[:, None], dh[None]) * limit
        ratio = np.maximum(th[:, None], dh[None]) / np.maximum(
            np.minimum(th[:, None], dh[None]), 1e-6)
        close = np.clip(1.0 - dist / np.maximum(scale, 1e-6), 0.0, 1.0)
        return np.where(ratio <= 1.5, close, 0.0)

    def _predict(self, tracks: list[_Track], steps: int) -> None:
        if not tracks:
            return
        # stacked by ufuncs into rows (+x is x, bit for bit): np.array or np.stack of the
        # arrays copies each, and every copy lets numpy go of the GIL
        means, covs = np.empty((len(tracks), 8)), np.empty((len(tracks), 8, 8))
        for i, t in enumerate(tracks):
            np.positive(t.mean, out=means[i])
            np.positive(t.cov, out=covs[i])
        for i, t in enumerate(tracks):
            if t.state is not TrackState.TRACKED:
                means[i, 7] = 0.0  # a lost face's height does not keep changing
        for _ in range(steps):
            means, covs = self._kf.predict(means, covs)
        for i, t in enumerate(tracks):
            t.mean, t.cov = means[i], covs[i]

    def _drop_duplicates(self) -> None:
        if not self._tracked or not self._lost:
            return
        iou = iou_matrix(_boxes(self._tracked), _boxes(self._lost))
        drop_tracked: set[int] = set()
        drop_lost: set[int] = set()
        for i, j in zip(*np.nonzero(iou > self.settings.duplicate_track_min_iou), strict=True):
            a, b = self._tracked[i], self._lost[j]
            if a.last_frame - a.start_frame > b.last_frame - b.start_frame:
                drop_lost.add(int(j))
            else:
                drop_tracked.add(int(i))
        self._tracked = [t for i, t in enumerate(self._tracked) if i not in drop_tracked]
        self._lost = [t for j, t in enumerate(self._lost) if j not in drop_lost]

"""What the face follower sees of one face in one frame, and the box arithmetic around it.

An :class:`Observation` is a face mesh (followed faces) or only a detection box (faces beyond
``analysis.max_faces``, or whose mesh did not fit); a :class:`Candidate` a detection no
followed face explains. The functions compare boxes (overlap, a tile search that looked and
did not find), and turn observations into :class:`~livecam.core.types.WithheldFaces`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from livecam.analysis.detect import SearchResult
from livecam.analysis.keepgil import copy_into
from livecam.analysis.mesh import MeshResult
from livecam.analysis.roi import Roi, box_from_landmarks
from livecam.core.boxes import box_iou
from livecam.core.types import Unswappable, WithheldFaces
from livecam.track.bytetrack import PAIRS_IN_PYTHON, iou_matrix

# Observations of two faces overlapping this much are one face seen twice (or about to be).
SAME_FACE_IOU = 0.3


@dataclass(frozen=True, slots=True)
class Observation:
    """One face seen in this frame: ``box_xyxy`` (4,) px (around the mesh, or the detection
    box), ``score``, ``mesh`` (None for a box-only face, then ``reason`` says why) and
    ``carried_from`` (the track whose landmarks gave the ROI, -1 for a detection); ``roi``:
    the ROI the mesh's landmarks give the next frame's carry, where it is known already."""

    box_xyxy: np.ndarray
    score: float
    mesh: MeshResult | None = None
    reason: Unswappable = Unswappable.NO_MESH
    carried_from: int = -1
    roi: Roi | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A detection that is no followed face: ``box_xyxy`` (4,), ``score``, ``keypoints_xy``
    (6, 2) px; ``from_search``: found by the tile search (faces too small for the whole-frame
    pass); ``stale``: found on an older frame (live mode's search runs on a worker)."""

    box_xyxy: np.ndarray
    score: float
    keypoints_xy: np.ndarray
    from_search: bool = False
    stale: bool = False


def inside_any(boxes: np.ndarray, region: np.ndarray, share: float = 0.6) -> bool:
    """True when one of ``boxes`` (M, 4) lies at least ``share`` of its area in ``region``."""
    if len(boxes) == 0:
        return False
    iw = np.clip(np.minimum(boxes[:, 2], region[2]) - np.maximum(boxes[:, 0], region[0]), 0,
                 None)
    ih = np.clip(np.minimum(boxes[:, 3], region[3]) - np.maximum(boxes[:, 1], region[1]), 0,
                 None)
    area = np.maximum((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]), 1e-6)
    return bool((iw * ih / area >= share).any())


def mesh_observation(mesh: MeshResult, score: float, carried_from: int) -> Observation:
    return Observation(box_from_landmarks(mesh.landmarks_xy), score, mesh,
                       carried_from=carried_from)


def floats(box: np.ndarray | Sequence[float]) -> list[float]:
    """A box (4,) as Python floats: its own values, which a float64 copy would hold (an
    array's ``tolist``; numpy's cast to float64 would let go of the GIL, see keepgil)."""
    return box.tolist() if isinstance(box, np.ndarray) else [float(v) for v in box]


def overlaps(box: np.ndarray, others: list[np.ndarray]) -> bool:
    """True when ``box`` (4,) is one face with one of ``others`` (each (4,)): IoU at least
    :data:`SAME_FACE_IOU` (the first such one ends the search)."""
    if not others:
        return False
    if len(others) > PAIRS_IN_PYTHON:
        rows = np.array(others, np.float64).reshape(-1, 4)
        return bool(iou_matrix(np.asarray(box)[None], rows).max() >= SAME_FACE_IOU)
    one = floats(box)
    return any(box_iou(one, floats(row)) >= SAME_FACE_IOU for row in others)


#: Detections narrower than this are ignored: nobody can be told apart at that size, and they
#: are mostly BlazeFace's false hits on texture (an 18 px "face" on t1's table).
MIN_FACE_PX = 24.0


def merge_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """Best first, one per face: a tile and the whole frame may both see it (this frame's
    best detection of it wins over an older frame's)."""
    kept: list[Candidate] = []
    for c in sorted(candidates, key=lambda c: (c.stale, -c.score)):
        if c.box_xyxy[2] - c.box_xyxy[0] < MIN_FACE_PX:
            continue
        if not overlaps(c.box_xyxy, [k.box_xyxy for k in kept]):
            kept.append(c)
    return sorted(kept, key=lambda c: -c.score)


def dedupe(obs: list[Observation]) -> list[Observation]:
    """Drop observations that repeat an earlier one (earlier = better: detections first)."""
    kept: list[Observation] = []
    for o in obs:
        if not overlaps(o.box_xyxy, [k.box_xyxy for k in kept]):
            kept.append(o)
    return kept


def refuted(box: np.ndarray, searched: SearchResult) -> bool:
    """True when a tile of ``searched`` holds ``box`` whole and found no face there."""
    rects = searched.searched_xyxy
    inside = ((rects[:, 0] <= box[0]) & (rects[:, 1] <= box[1]) & (rects[:, 2] >= box[2])
              & (rects[:, 3] >= box[3]))
    return bool(inside.any()) and not overlaps(box, list(searched.faces.boxes_xyxy))


def grown(box: np.ndarray, fraction: float) -> np.ndarray:
    cx, cy = 0.5 * (box[0] + box[2]), 0.5 * (box[1] + box[3])
    hw, hh = 0.5 * (box[2] - box[0]) * (1 + fraction), 0.5 * (box[3] - box[1]) * (1 + fraction)
    return np.array([cx - hw, cy - hh, cx + hw, cy + hh], np.float32)


def moved_marks(marks: np.ndarray, box: np.ndarray) -> np.ndarray:
    """Landmarks (K, 2) moved and scaled from their own box onto ``box``."""
    own = box_from_landmarks(marks)
    scale = float(box[2] - box[0]) / max(float(own[2] - own[0]), 1e-6)
    centre_own = 0.5 * (own[:2] + own[2:])
    centre_new = 0.5 * (box[:2] + box[2:])
    return ((marks - centre_own) * scale + centre_new).astype(np.float32, copy=False)


def as_withheld(held: list[tuple[int, Observation, Unswappable]]) -> WithheldFaces:
    if not held:
        return WithheldFaces()
    k = max((o.mesh.landmarks_xy.shape[0] for _, o, _ in held if o.mesh is not None), default=0)
    marks = np.full((len(held), k, 2), np.nan, np.float32)
    for i, (_, o, _) in enumerate(held):
        if o.mesh is not None and k:
            copy_into(marks[i], o.mesh.landmarks_xy)  # marks[i] = ..., keeping the GIL
    return WithheldFaces(np.array([floats(o.box_xyxy) for _, o, _ in held], np.float32),
                         marks,
                         np.array([t for t, _, _ in held], np.int64),
                         np.array([r for _, _, r in held], np.uint8))


def any_overlap(obs: list[Observation]) -> bool:
    """Two observations on one face (people crossing: who is in front must be decided on
    this frame's detections)."""
    if len(obs) < 2:
        return False
    rows = [floats(o.box_xyxy) for o in obs]
    if len(obs) * (len(obs) - 1) // 2 > PAIRS_IN_PYTHON:
        boxes = np.array(rows, np.float64)
        iou = iou_matrix(boxes, boxes)
        np.fill_diagonal(iou, 0.0)
        return bool(iou.max() > SAME_FACE_IOU)
    # IoU is symmetric: each pair once
    return any(box_iou(a, b) > SAME_FACE_IOU for i, a in enumerate(rows) for b in rows[i + 1:])


def at_edge(box: np.ndarray, w: int, h: int, margin_px: float = 2.0) -> bool:
    return bool(box[0] <= margin_px or box[1] <= margin_px or box[2] >= w - margin_px
                or box[3] >= h - margin_px)

"""Where the follower runs the face mesh, and when it runs it again: the carried meshes of the
followed faces (re-centred when the face outran its track), the checks of those meshes against
this frame's detections, and a new face's first mesh settled where the carried ones will be.

Functions of the follower's state passed in (networks, last landmarks, track velocities and
scores); each adds the time its mesh runs take to ``timings["mesh"]`` (ms). Called only from
the follower's thread (see :class:`~livecam.analysis.follower.FaceFollower`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from livecam.analysis.mesh import MeshResult
from livecam.analysis.networks import FaceNetworks
from livecam.analysis.observations import (
    Observation,
    at_edge,
    floats,
    mesh_observation,
)
from livecam.analysis.roi import (
    Roi,
    box_and_roi_from_landmarks,
    roi_from_detection,
    roi_from_landmarks,
)
from livecam.core.boxes import share_in_frame
from livecam.core.types import Faces, ImageBGR
from livecam.track.bytetrack import iou_matrix

# A carried mesh overlapping a detection of this frame by IoU in this range has slid off the
# face (mesh and detection boxes of one face agree to IoU ~0.8): it is re-run on the detection.
_SLID_IOU = (0.1, 0.5)
# A carried mesh whose centre lands this far (fraction of the ROI side) from the ROI's centre
# is run again on a ROI centred on it (fast motion the track's velocity did not predict).
_RECENTER_FRACTION = 0.08
# A new face's first mesh is run again on its own landmarks' ROI (see settled) at most this
# often, or until a run moves the points by less than this fraction of the face width (on the
# same image, the runs settle to ~0.02 px, ~0.0002 face widths).
_SETTLE_RUNS = 6
_SETTLED_FRACTION = 0.002


def _add_mesh_ms(timings: dict[str, float], t0_ns: int) -> None:
    timings["mesh"] = timings.get("mesh", 0.0) + (time.perf_counter_ns() - t0_ns) / 1e6


def carry(networks: FaceNetworks, image: ImageBGR, marks: dict[int, np.ndarray],
          velocities_px: dict[int, tuple[float, float]], scores: dict[int, float], gap: int,
          timings: dict[str, float], rois: dict[int, Roi] | None = None) -> list[Observation]:
    """Meshes on ROIs from each followed track's last landmarks ``marks`` (track id -> (K, 2)
    px), moved ``gap`` frames on by the track's velocity (px per frame); one observation per
    mesh found, carried from its track and with the track's score (default 1.0), and with the
    ROI its landmarks give. ``rois``: those landmarks' ROIs where known (an observation's
    ``roi`` of the frame before), so not computed again."""
    track_ids = list(marks)
    if not track_ids:
        return []
    t = time.perf_counter_ns()
    rois_now: list[Roi] = []
    for tid in track_ids:
        vx, vy = velocities_px.get(tid, (0.0, 0.0))
        known = rois.get(tid) if rois else None
        roi = known if known is not None else roi_from_landmarks(marks[tid])
        rois_now.append(roi.shifted(vx * gap, vy * gap))
    meshes = networks.landmarks(image, rois_now)
    out: list[Observation] = []
    for tid, roi, mesh in zip(track_ids, rois_now, meshes, strict=True):
        if mesh is None:
            continue
        box, again = box_and_roi_from_landmarks(mesh.landmarks_xy)
        # A face moving faster than its track predicts sits off the ROI's centre, and the
        # mesh of an off-centre face lags it (about half the offset, measured): look once
        # more, centred where the mesh found it, rather than fall further behind each frame.
        offset_px = math.hypot(again.center_x_px - roi.center_x_px,
                               again.center_y_px - roi.center_y_px)
        if offset_px > _RECENTER_FRACTION * roi.size_px:
            centred = networks.landmarks(image, [again])[0]
            if centred is not None:
                mesh = centred
                box, again = box_and_roi_from_landmarks(mesh.landmarks_xy)
        out.append(Observation(box, scores.get(tid, 1.0), mesh, carried_from=tid, roi=again))
    _add_mesh_ms(timings, t)
    return out


def settled(networks: FaceNetworks, image: ImageBGR, mesh: MeshResult) -> MeshResult:
    """A new face's mesh run again on the ROI from its own landmarks (the ROI it is carried
    on from the next frame) until it stops moving, at most ``_SETTLE_RUNS`` times.

    The mesh depends on its crop: from a detection's ROI it lies 0.3-4 px (t1's six
    people, a still astronaut) from where the carried meshes settle, and each carried
    frame takes only about half of the gap (measured on t1 and the astronaut). The smoother
    starts from this first mesh, so a still face's swap slid by that much over the next
    second (4.5 px for t1's turned face; the flicker of tests/swap/test_temporal). Costs
    up to ``_SETTLE_RUNS`` meshes per face admitted (t1's six people: 22 in all, once),
    none per frame carried.
    """
    for _ in range(_SETTLE_RUNS):
        again = networks.landmarks(image, [roi_from_landmarks(mesh.landmarks_xy)])[0]
        if again is None:
            break
        move_px = float(np.linalg.norm(again.landmarks_xy - mesh.landmarks_xy, axis=1).mean())
        mesh = again
        if move_px < _SETTLED_FRACTION * float(np.ptp(mesh.landmarks_xy[:, 0])):
            break
    return mesh


def verified(networks: FaceNetworks, image: ImageBGR, carried: list[Observation],
             whole: Faces | None, timings: dict[str, float]) -> list[Observation]:
    """Carried meshes checked against this frame's detections: one that only partly
    overlaps a detection has slid off its face (the track's motion overshot a stop, or a
    jump under load) and is run again on that detection's ROI. A carried mesh no detection
    overlaps stays (a face the detector misses this frame)."""
    if whole is None or len(whole) == 0 or not carried:
        return list(carried)
    # IoUs as Python floats and argmax as max (both take the first of equals): numpy's
    # stack, casts and argmax would each let go of the GIL (see keepgil)
    iou = iou_matrix(np.array([floats(o.box_xyxy) for o in carried]),
                     whole.boxes_xyxy).tolist()
    # the carried face each detection overlaps most
    owner = [max(range(len(col)), key=col.__getitem__) for col in zip(*iou, strict=True)]
    h, w = image.shape[:2]
    out = []
    for i, o in enumerate(carried):
        row = iou[i]
        j = max(range(len(row)), key=row.__getitem__)
        # a detection on another followed face (two people crossing: the one behind
        # overlaps the one in front) is that face's, not a sign this one slid; at the
        # frame's edge a detection sees only the part inside, the carried mesh the face
        if (not _SLID_IOU[0] < row[j] < _SLID_IOU[1] or owner[j] != i
                or share_in_frame(o.box_xyxy.tolist(), w, h) < 1.0
                or share_in_frame(whole.boxes_xyxy[j].tolist(), w, h) < 1.0
                or at_edge(whole.boxes_xyxy[j], w, h)):
            out.append(o)
            continue
        t = time.perf_counter_ns()
        mesh = networks.landmarks(image, [roi_from_detection(
            whole.boxes_xyxy[j], whole.keypoints_xy[j])])[0]
        _add_mesh_ms(timings, t)
        out.append(o if mesh is None else mesh_observation(mesh, o.score, o.carried_from))
    return out


def meshes_for(networks: FaceNetworks, image: ImageBGR, dets: Faces, which: list[int],
               timings: dict[str, float]) -> list[Observation]:
    """An observation for each detection ``which`` indexes in ``dets``: its mesh from the
    detection's ROI (carried from no track), or the detection's box alone when none is found."""
    t = time.perf_counter_ns()
    meshes = networks.landmarks(image, [
        roi_from_detection(dets.boxes_xyxy[i], dets.keypoints_xy[i]) for i in which])
    _add_mesh_ms(timings, t)
    return [mesh_observation(m, float(dets.scores[i]), -1) if m is not None
            else Observation(dets.boxes_xyxy[i], float(dets.scores[i]))
            for i, m in zip(which, meshes, strict=True)]

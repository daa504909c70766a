"""The analysis stage: detect (every N frames) -> track -> landmarks -> smooth -> select.

Per frame, every face gets one *observation*: a face mesh (MediaPipe, on a rotated ROI) and the
box around it. On detection frames the ROIs come from BlazeFace detections; between them, each
tracked face's ROI comes from its own landmarks of the previous frame, moved by the track's
Kalman velocity (MediaPipe's tracking mode, per track). ByteTrack always sees boxes of the same
kind (around the landmarks), so its Kalman filter is not jolted every N frames by a change of
box definition. When two followed faces' observations start to overlap (people crossing) a
detection is forced, so a face hidden behind another is lost and predicted by the tracker
instead of having its mesh slide onto the other face.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np

from livecam.analysis.background import BackgroundDetector
from livecam.analysis.detect import BlazeFaceDetector
from livecam.analysis.landmarks import six_keypoints
from livecam.analysis.mesh import FaceMeshLandmarker, MeshResult
from livecam.analysis.roi import Roi, boxes_from_landmarks, roi_from_detection, roi_from_landmarks
from livecam.analysis.select import FaceSelector
from livecam.analysis.smooth import LandmarkSmoother
from livecam.config.analysis import AnalysisConfig
from livecam.core.stage import StageBase
from livecam.core.types import Faces, Packet
from livecam.track.bytetrack import ByteTracker, iou_matrix
from livecam.track.settings import ByteTrackSettings

log = logging.getLogger(__name__)

# Observations of two faces overlapping this much are one face seen twice (or about to be).
_SAME_FACE_IOU = 0.3
# A carried mesh whose centre lands this far (fraction of the ROI side) from the ROI's centre
# is run again on a ROI centred on it (fast motion the track's velocity did not predict).
_RECENTER_FRACTION = 0.08


@dataclass(frozen=True, slots=True)
class _Observation:
    mesh: MeshResult
    score: float
    carried_from: int  # track id whose landmarks gave the ROI, -1 for a detection


class AnalysisStage(StageBase):
    """Finds, follows and describes faces. ``process`` returns the packet with ``faces`` set:
    ``boxes_xyxy`` (N, 4) around the smoothed landmarks, ``scores`` (N,), ``keypoints_xy``
    (N, 6, 2) from the mesh (BlazeFace order), ``landmarks_xy`` (N, 468|478, 2),
    ``landmarks_z`` (N, 468|478), ``track_ids`` (N,) >= 1, all float32 px / int64.

    Only the pipeline thread may call ``process``. ``last_timings_ms`` holds the latest
    frame's split (detect, mesh, track, smooth, select) for benchmarks and metrics.
    """

    name = "analysis"

    def __init__(self, config: AnalysisConfig, *, fps: float = 30.0,
                 tracker_settings: ByteTrackSettings | None = None,
                 selector: FaceSelector | None = None,
                 detect_in_background: bool = False) -> None:
        self.config = config
        self.fps = fps
        self.tracker_settings = tracker_settings or ByteTrackSettings()
        self.detector = BlazeFaceDetector(
            model=config.detector_model, min_score=self.tracker_settings.low_score_threshold,
            max_faces=config.max_faces, tile_size_px=config.tile_size_px,
            tiles_per_call=config.tiles_per_detection)
        # Live mode: detections run on a worker thread (see _observe_live); offline and in
        # tests they run in process(), so results do not depend on timing.
        self.background = BackgroundDetector(self.detector) if detect_in_background else None
        self.landmarker = FaceMeshLandmarker(refine_landmarks=config.refine_landmarks)
        self.tracker = ByteTracker(self.tracker_settings)
        self.smoother = LandmarkSmoother(
            min_cutoff_hz=config.smooth_min_cutoff_hz, beta=config.smooth_beta,
            derivative_cutoff_hz=config.smooth_derivative_cutoff_hz)
        self.selector = selector or FaceSelector("all")
        self.last_timings_ms: dict[str, float] = {}
        self.last_frame_detected = False
        self._raw_landmarks: dict[int, np.ndarray] = {}  # track id -> last raw (K, 2)
        self._scores: dict[int, float] = {}
        self._frames_since_detection = 0
        self._last_index: int | None = None
        self._opened = False

    def open(self) -> None:
        if self._opened:
            return
        (self.background or self.detector).open()
        self.landmarker.open()
        self.selector.open()
        self._opened = True

    def close(self) -> None:
        (self.background or self.detector).close()
        self.landmarker.close()
        self.selector.close()
        self._opened = False

    def process(self, packet: Packet) -> Packet:
        image = packet.image_bgr
        if (image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8
                or min(image.shape[:2]) < 16):
            return packet.with_fields(faces=Faces.empty())
        timings: dict[str, float] = {}
        t0 = time.perf_counter_ns()
        if self.background is not None:
            observations = self._observe_live(image, packet.frame.index, timings)
        else:
            observations = self._observe(image, timings)

        t1 = time.perf_counter_ns()
        xy = np.stack([o.mesh.landmarks_xy for o in observations]) if observations else np.zeros(
            (0, self.landmarker.num_landmarks, 2), np.float32)
        boxes = boxes_from_landmarks(xy)
        scores = np.array([o.score for o in observations], np.float32)
        result = self.tracker.update(boxes, scores,
                                     frame_size_px=(image.shape[1], image.shape[0]))
        t2 = time.perf_counter_ns()
        timings["track"] = (t2 - t1) / 1e6

        dt_s = self._dt_s(packet.frame.index)
        faces = self._smoothed_faces(observations, result, dt_s)
        t3 = time.perf_counter_ns()
        timings["smooth"] = (t3 - t2) / 1e6
        selected = self.selector.select(faces, image)
        timings["select"] = (time.perf_counter_ns() - t3) / 1e6
        timings["total"] = (time.perf_counter_ns() - t0) / 1e6
        self.last_timings_ms = timings
        return packet.with_fields(faces=selected)

    # -- observation ----------------------------------------------------------------------

    def _detection_due(self) -> bool:
        return (not self._raw_landmarks
                or self._frames_since_detection + 1 >= self.config.detect_every_n_frames)

    def _observe(self, image: np.ndarray, timings: dict[str, float]) -> list[_Observation]:
        """Offline: detect on this frame when due (or when faces overlap), else carry."""
        observations: list[_Observation] | None = None
        detect = self._detection_due()
        if not detect:
            observations = self._carry(image, list(self._raw_landmarks), timings)
            detect = observations is None  # overlapping faces: look again
        if detect or observations is None:
            observations = self._detect_and_carry(image, timings)
            self._frames_since_detection = 0
        else:
            self._frames_since_detection += 1
        self.last_frame_detected = detect
        return observations

    def _observe_live(self, image: np.ndarray, index: int, timings: dict[str, float],
                      ) -> list[_Observation]:
        """Live: carry every face; merge the worker's detections when they are ready.

        Detections describe an older frame. They are matched against this frame's carried
        boxes, not against the tracks' boxes at that older frame (no history to keep): a
        detection that overlaps no carried face is a new face and gets a mesh on *this* frame
        from the detection's ROI, and ``_dedupe`` drops it if that mesh lands on a face already
        followed. The cost: a face that moved far between the two frames (more than ~half its
        width) costs one extra mesh call (~5 ms) the frame the result arrives, never a
        duplicate track. When followed faces overlap (people crossing) the detector runs now,
        on this thread, as offline: who is in front must be decided on this frame.
        """
        assert self.background is not None
        carried = self._carry(image, list(self._raw_landmarks), timings) \
            if self._raw_landmarks else []
        if carried is None:
            self.background.take()  # stale beside the detection made now
            t = time.perf_counter_ns()
            dets = self.background.detect_now(image)
            timings["detect"] = (time.perf_counter_ns() - t) / 1e6
            self._frames_since_detection = 0
            self.last_frame_detected = True
            return self._detect_and_carry(image, timings, dets)
        self.last_frame_detected = False
        result = self.background.take()
        if result is not None:
            self.last_frame_detected = True
            dets = result.faces
            known = boxes_from_landmarks(np.stack([o.mesh.landmarks_xy for o in carried])) \
                if carried else np.zeros((0, 4), np.float32)
            fresh = [i for i in range(len(dets)) if len(known) == 0
                     or iou_matrix(dets.boxes_xyxy[i:i + 1], known).max() < _SAME_FACE_IOU]
            if fresh:
                t = time.perf_counter_ns()
                meshes = self.landmarker.landmarks(image, [
                    roi_from_detection(dets.boxes_xyxy[i], dets.keypoints_xy[i]) for i in fresh])
                timings["mesh"] = timings.get("mesh", 0.0) + (time.perf_counter_ns() - t) / 1e6
                new = [_Observation(m, float(dets.scores[i]), -1)
                       for i, m in zip(fresh, meshes, strict=True) if m is not None]
                if len(new) < len(fresh):
                    # a face the detector saw has moved off its (older) box: look again now
                    # rather than N frames later
                    self._frames_since_detection = self.config.detect_every_n_frames
                carried = _dedupe(carried + new, prefer_detections=False)
        if self._detection_due() and self.background.submit(index, image):
            self._frames_since_detection = 0
        else:
            self._frames_since_detection += 1
        return sorted(carried, key=lambda o: -o.score)[: self.config.max_faces]

    def _carry(self, image: np.ndarray, track_ids: list[int], timings: dict[str, float],
               ) -> list[_Observation] | None:
        """Meshes on ROIs from each track's last landmarks; None when two now overlap."""
        t = time.perf_counter_ns()
        velocities = self.tracker.velocities_px()
        rois: list[Roi] = []
        for tid in track_ids:
            vx, vy = velocities.get(tid, (0.0, 0.0))
            rois.append(roi_from_landmarks(self._raw_landmarks[tid]).shifted(vx, vy))
        meshes = self.landmarker.landmarks(image, rois)
        # A face moving faster than its track predicts sits off the ROI's centre, and the
        # mesh of an off-centre face lags it (about half the offset, measured): look once
        # more, centred where the mesh found it, rather than fall further behind each frame.
        for i, (roi, mesh) in enumerate(zip(rois, meshes, strict=True)):
            if mesh is None:
                continue
            again = roi_from_landmarks(mesh.landmarks_xy)
            offset_px = math.hypot(again.center_x_px - roi.center_x_px,
                                   again.center_y_px - roi.center_y_px)
            if offset_px > _RECENTER_FRACTION * roi.size_px:
                meshes[i] = self.landmarker.landmarks(image, [again])[0] or mesh
        timings["mesh"] = timings.get("mesh", 0.0) + (time.perf_counter_ns() - t) / 1e6
        obs = [_Observation(m, self._scores.get(tid, 1.0), tid)
               for tid, m in zip(track_ids, meshes, strict=True) if m is not None]
        if len(obs) > 1:
            iou = iou_matrix(*(2 * [boxes_from_landmarks(np.stack([o.mesh.landmarks_xy
                                                                    for o in obs]))]))
            np.fill_diagonal(iou, 0.0)
            if iou.max() > _SAME_FACE_IOU:
                return None
        return obs

    def _detect_and_carry(self, image: np.ndarray, timings: dict[str, float],
                          dets: Faces | None = None) -> list[_Observation]:
        t = time.perf_counter_ns()
        if dets is None:
            dets = self.detector.detect(image)
        t_det = time.perf_counter_ns()
        timings["detect"] = timings.get("detect", 0.0) + (t_det - t) / 1e6
        rois = [roi_from_detection(dets.boxes_xyxy[i], dets.keypoints_xy[i])
                for i in range(len(dets))]
        meshes = self.landmarker.landmarks(image, rois)
        timings["mesh"] = timings.get("mesh", 0.0) + (time.perf_counter_ns() - t_det) / 1e6
        obs = [_Observation(m, float(dets.scores[i]), -1)
               for i, m in enumerate(meshes) if m is not None]
        obs = _dedupe(obs)
        # Faces followed so far but not detected now (a missed frame, or a small face only a
        # tile can see and that tile's turn has passed) are carried by their own landmarks.
        det_boxes = boxes_from_landmarks(np.stack([o.mesh.landmarks_xy for o in obs])) if obs \
            else np.zeros((0, 4), np.float32)
        missing = []
        for tid, lm in self._raw_landmarks.items():
            prev_box = boxes_from_landmarks(lm[None])
            if len(det_boxes) == 0 or iou_matrix(prev_box, det_boxes).max() < _SAME_FACE_IOU:
                missing.append(tid)
        if missing:
            carried = self._carry(image, missing, timings) or []
            obs = _dedupe(obs + carried)
        return sorted(obs, key=lambda o: -o.score)[: self.config.max_faces]

    # -- output ---------------------------------------------------------------------------

    def _smoothed_faces(self, observations: list[_Observation], result: object,
                        dt_s: float) -> Faces:
        from livecam.track.bytetrack import TrackResult

        assert isinstance(result, TrackResult)
        alive = {int(t) for t in result.track_ids}
        self._raw_landmarks = {}
        self.smoother.keep_only(alive)
        # Tracks born this frame are not output yet, but must be observed next frame (which
        # is usually not a detection frame) for ByteTrack to confirm them: carry them too.
        for tid, det in zip(result.pending_track_ids, result.pending_det_indices, strict=True):
            obs = observations[int(det)]
            self._raw_landmarks[int(tid)] = obs.mesh.landmarks_xy
            self._scores[int(tid)] = obs.score
            alive.add(int(tid))
        for tid in list(self._scores):
            if tid not in alive:
                del self._scores[tid]
        if len(result) == 0:
            return Faces.empty()
        xy_out, z_out, score_out = [], [], []
        for tid, det, new in zip(result.track_ids, result.det_indices, result.is_new,
                                 strict=True):
            tid = int(tid)
            obs = observations[int(det)]
            self._raw_landmarks[tid] = obs.mesh.landmarks_xy
            # a carried observation keeps the score of the detection that started it
            self._scores[tid] = obs.score
            if new:
                self.smoother.reset(tid)
            if self.config.smoothing:
                xy, z = self.smoother.smooth(tid, obs.mesh.landmarks_xy, obs.mesh.landmarks_z,
                                             dt_s)
            else:
                xy, z = obs.mesh.landmarks_xy, obs.mesh.landmarks_z
            xy_out.append(xy)
            z_out.append(z)
            score_out.append(obs.score)
        xy_arr = np.stack(xy_out).astype(np.float32)
        return Faces(boxes_xyxy=boxes_from_landmarks(xy_arr),
                     scores=np.array(score_out, np.float32),
                     keypoints_xy=six_keypoints(xy_arr), landmarks_xy=xy_arr,
                     landmarks_z=np.stack(z_out).astype(np.float32),
                     track_ids=result.track_ids.astype(np.int64))

    def _dt_s(self, index: int) -> float:
        # Frame indices, not capture clocks: files decode faster than real time, and the
        # filter must behave the same on a file as on the camera that recorded it.
        step = 1 if self._last_index is None else max(1, index - self._last_index)
        self._last_index = index
        return step / self.fps


def _dedupe(obs: list[_Observation], *, prefer_detections: bool = True,
            ) -> list[_Observation]:
    """Drop observations that repeat an earlier (better) one: detections before carries
    (or carries before detections of an older frame)."""
    ordered = sorted(obs, key=lambda o: ((o.carried_from >= 0) == prefer_detections, -o.score))
    kept: list[_Observation] = []
    boxes: list[np.ndarray] = []
    for o in ordered:
        box = boxes_from_landmarks(o.mesh.landmarks_xy[None])
        if boxes and iou_matrix(box, np.concatenate(boxes)).max() > _SAME_FACE_IOU:
            continue
        kept.append(o)
        boxes.append(box)
    return kept

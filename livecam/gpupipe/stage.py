"""The all-GPU pipeline as one :class:`~livecam.core.stage.Stage` for ``livecam run``.

:class:`GpuSwapStage` replaces the CPU analysis and neural swap stages when ``swap.mode`` is
``neural`` and ``gpu.pipeline`` asks for it (:mod:`livecam.gpupipe.factory` decides and
builds it). Per frame it fills one slot of a
:class:`~livecam.gpupipe.scheduler.GpuScheduler` (the frame, each face slot's ROI with
``roi_override``, latent and validity); the frame program does detection (every
``analysis.detect_every_n_frames`` frames), face mesh, alignment, generator and paste-back on
the torch device (CUDA when present, else the CPU: the code CI runs). Boxes and landmarks come
back for :class:`~livecam.track.bytetrack.ByteTracker` on the host, which names the faces; the
stage keeps each face slot's next ROI (the program's ``roi_next`` moved by the track's Kalman
velocity). Detections no face slot covers become new face slots and the frame runs once more,
so a face is meshed on the frame it is first detected; it is swapped from the next frame, once
it has a track id (as on the CPU path). docs/gpu-pipeline.md ("Using it from livecam run") has
the details. One frame in flight: ``process`` returns the frame it was given. Only the
pipeline thread calls ``process``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from livecam.analysis.roi import ROI_SCALE, boxes_from_landmarks
from livecam.core.errors import IdentityError
from livecam.core.stage import StageBase
from livecam.core.types import Faces, Packet
from livecam.swap.assign import IdentityAssigner

if TYPE_CHECKING:
    from livecam.analysis.select import FaceSelector
    from livecam.config.gpu import GpuConfig
    from livecam.gpupipe.scheduler import GpuScheduler, TickResult
    from livecam.track.settings import ByteTrackSettings

log = logging.getLogger(__name__)

# Mesh presence below this means the face was lost (the program's own paste rule).
PRESENCE_THRESHOLD = 0.5
# Two observations overlapping this much are one face seen twice.
SAME_FACE_IOU = 0.3
LATENT_DIM = 512

EmbeddingFn = Callable[[str], "np.ndarray | None"]


@dataclass
class _Row:
    """One face slot: ``roi`` (4,) float32 (centre x, centre y, side, rotation rad) for the
    next frame, ``track_id`` (-1 until ByteTrack names it), ``score`` of the detection that
    started it, ``unconfirmed`` frames seen without a confirmed track."""

    roi: np.ndarray
    track_id: int
    score: float
    unconfirmed: int = 0


class GpuSwapStage(StageBase):
    """Detect, follow and swap faces on the torch device (see the module docstring).

    ``engine``: an unopened torch-side generator engine (``TorchEngine``: ``open``,
    ``run_torch``, ``device`` after open); ``model_path`` its ONNX file (its ``emap``).
    ``source_embedding(name)`` gives an identity's (512,) ArcFace embedding or None, and may
    raise :class:`IdentityError` (the frame then goes out unswapped, logged at most once per
    ``missing_log_interval_s``). ``require_models()`` runs first in ``open`` and raises
    :class:`ModelError` naming ``livecam models fetch`` for a missing model. ``models_dir``:
    MediaPipe's ``modules`` folder (None = the installed mediapipe).

    ``process`` returns ``faces`` as the CPU analysis stage does: ``boxes_xyxy`` (N, 4) around
    the landmarks, ``scores`` (N,), ``keypoints_xy`` (N, 6, 2), ``landmarks_xy`` (N, 468, 2),
    ``landmarks_z`` (N, 468), ``track_ids`` (N,) >= 1 (raw mesh landmarks: the swap used them on
    the device, so they are not smoothed). ``last_timings_ms`` holds the latest frame's split.
    """

    name = "gpu"
    backend = "torch"

    def __init__(self, engine: Any, model_path: str | Path, source_embedding: EmbeddingFn, *,
                 gpu: GpuConfig, detect_every_n_frames: int = 5,
                 tracker_settings: ByteTrackSettings | None = None,
                 models_dir: str | Path | None = None,
                 require_models: Callable[[], object] | None = None,
                 missing_log_interval_s: float = 5.0,
                 assign: tuple[str, ...] = (),
                 selector: FaceSelector | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self._assigner = IdentityAssigner(assign)
        self.selector = selector if selector is not None and selector.mode != "all" else None
        # track ids the selector kept on the last frame (None: every face is swapped)
        self._selected: set[int] | None = None
        self.model_path = Path(model_path)
        self.source_embedding = source_embedding
        self.gpu = gpu
        self.detect_every_n_frames = max(1, detect_every_n_frames)
        self.tracker_settings = tracker_settings
        self.models_dir = models_dir
        self.require_models = require_models
        self.missing_log_interval_s = missing_log_interval_s
        self._clock = clock
        self.last_timings_ms: dict[str, float] = {}
        self.last_frame_detected = False
        self.graph_modes: dict[str, str] = {}
        self._program: Any = None
        self._tracker: Any = None
        self._emap: np.ndarray | None = None
        self._scheduler: GpuScheduler | None = None
        self._frame_hw: tuple[int, int] = (0, 0)
        self._rows: list[_Row] = []
        self._since_detection = 0
        self._latents: dict[str, np.ndarray] = {}
        self._failed: dict[str, float] = {}  # identity name -> when its load last failed

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        if self._program is not None:
            return
        if self.require_models is not None:
            self.require_models()
        from livecam.gpupipe.build import ProgramOptions, build_program
        from livecam.swap.neural import read_emap
        from livecam.track.bytetrack import ByteTracker

        self.engine.open()
        device = self.engine.device
        options = ProgramOptions.from_config(self.gpu)
        if device.type != "cuda":
            options = replace(options, precision="fp32")  # CPU fp16 convolutions crawl
        self._emap = read_emap(self.model_path)
        self._program = build_program(self.engine, device=device, max_faces=self.gpu.max_faces,
                                      models_dir=self.models_dir, options=options)
        self._tracker = ByteTracker(self.tracker_settings)
        if self.selector is not None:
            self.selector.open()
        log.info("GPU pipeline on %s: %d face slots, detector every %d frames, CUDA graphs %s",
                 device, self.gpu.max_faces, self.detect_every_n_frames,
                 "on" if self.gpu.cuda_graphs and device.type == "cuda" else "off")

    def close(self) -> None:
        if self._scheduler is not None:
            self._scheduler.close()
        self._scheduler = None
        self._frame_hw = (0, 0)
        self._program = None
        self._tracker = None
        self._rows = []
        self._selected = None
        if self.selector is not None:
            self.selector.close()
        self._latents.clear()
        self._failed.clear()
        if hasattr(self.engine, "close"):
            self.engine.close()

    def _scheduler_for(self, height_px: int, width_px: int) -> GpuScheduler:
        """The scheduler for this frame size (a new size re-allocates the slots and graphs)."""
        if self._scheduler is not None and self._frame_hw == (height_px, width_px):
            return self._scheduler
        from livecam.gpupipe.scheduler import GpuScheduler
        from livecam.gpupipe.slots import SlotShape

        if self._scheduler is not None:
            self._scheduler.close()
        device = self.engine.device
        shape = SlotShape(1, height_px, width_px, self.gpu.max_faces)
        sched = GpuScheduler(self._program, shape, device, n_slots=self.gpu.slots,
                             use_graphs=self.gpu.cuda_graphs and device.type == "cuda")
        sched.open()
        if device.type == "cuda":
            t0 = time.perf_counter()
            self.graph_modes = sched.warmup()
            log.info("GPU pipeline %dx%d: graphs captured in %.1f s (%s)", width_px, height_px,
                     time.perf_counter() - t0, sorted(set(self.graph_modes.values())))
        self._scheduler, self._frame_hw = sched, (height_px, width_px)
        self._rows = []  # ROIs of another frame size mean nothing here
        return sched

    # -- per frame ------------------------------------------------------------------------

    def process(self, packet: Packet) -> Packet:
        if self._program is None:
            raise RuntimeError("GpuSwapStage.process called before open()")
        image = packet.image_bgr
        if (image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8
                or min(image.shape[:2]) < 16):
            return packet.with_fields(faces=Faces.empty())
        t0 = time.perf_counter_ns()
        sched = self._scheduler_for(int(image.shape[0]), int(image.shape[1]))
        detect = not self._rows or self._since_detection + 1 >= self.detect_every_n_frames
        rows = self._rows
        latents, valid = self._plan(rows, packet)
        result = self._tick(sched, image, rows, latents, valid, detect)
        ticks = 1
        if detect:
            self._since_detection = 0
            found = self._new_rows(result, rows)
            if found:
                rows = [r for r, p in zip(rows, result.presence, strict=True)
                        if p >= PRESENCE_THRESHOLD] + found
                rows = rows[: self.gpu.max_faces]
                latents, valid = self._plan(rows, packet)
                result = self._tick(sched, image, rows, latents, valid, False)
                ticks = 2
        else:
            self._since_detection += 1
        self.last_frame_detected = detect
        t1 = time.perf_counter_ns()
        swapped = bool((valid & (result.presence >= PRESENCE_THRESHOLD)).any())
        out = result.frames_bgr[0].copy() if swapped else packet.image_bgr
        faces = self._track(result, rows)
        if self.selector is not None:
            # analysis.select: only the kept faces are swapped, from the next frame on (this
            # frame's swap ran with the mesh, before its faces were known)
            faces = self.selector.select(faces, packet.image_bgr)
            self._selected = {int(t) for t in faces.track_ids}
        t2 = time.perf_counter_ns()
        self.last_timings_ms = {"gpu": (t1 - t0) / 1e6, "track": (t2 - t1) / 1e6,
                                "total": (t2 - t0) / 1e6, "ticks": float(ticks)}
        return packet.with_fields(image_bgr=out, faces=faces)

    def _tick(self, sched: GpuScheduler, image: np.ndarray, rows: list[_Row],
              latents: np.ndarray, valid: np.ndarray, detect: bool) -> TickResult:
        n = len(rows)
        rois = np.stack([r.roi for r in rows]) if rows else np.zeros((0, 4), np.float32)

        def fill(slot: Any) -> None:
            slot.frames_in_host.numpy()[0] = image
            fh = slot.faces_host
            fh.frame_index.numpy()[:n] = 0
            fh.roi.numpy()[:n] = rois
            fh.roi_override.numpy()[:n] = True
            fh.latents.numpy()[:n] = latents
            fh.valid.numpy()[:n] = valid

        sched.submit(fill, n, detect=detect)
        return sched.collect()

    def _plan(self, rows: list[_Row], packet: Packet) -> tuple[np.ndarray, np.ndarray]:
        """Latents (n, 512) float32 and swap flags (n,) bool of the rows for this frame."""
        latents = np.zeros((len(rows), LATENT_DIM), np.float32)
        valid = np.zeros(len(rows), bool)
        if packet.state.bypass:
            return latents, valid
        for i, row in enumerate(rows):
            if row.track_id < 0:
                continue  # no confirmed track yet: followed, swapped from the next frame on
            if self._selected is not None and row.track_id not in self._selected:
                continue  # analysis.select left this face out
            name = self._assigner.identity_for(packet.state, row.track_id)
            latent = self._latent(name) if name else None
            if latent is not None:
                latents[i], valid[i] = latent, True
        return latents, valid

    def _latent(self, name: str) -> np.ndarray | None:
        """inswapper's (512,) source latent of an identity, cached; None when unusable."""
        cached = self._latents.get(name)
        if cached is not None:
            return cached
        failed = self._failed.get(name)
        if failed is not None and self._clock() - failed < self.missing_log_interval_s:
            return None
        from livecam.swap.neural import latents_from_embeddings

        assert self._emap is not None
        try:
            embedding = self.source_embedding(name)
            why = "it has no usable photo"
        except IdentityError as exc:
            embedding, why = None, str(exc)
        if embedding is None:
            self._failed[name] = self._clock()
            log.warning("identity %r is unavailable, its faces go out unswapped: %s", name, why)
            return None
        self._failed.pop(name, None)
        latent = latents_from_embeddings(np.asarray(embedding)[None], self._emap)[0]
        self._latents[name] = latent
        return latent

    # -- following faces on the host ------------------------------------------------------

    def _new_rows(self, result: TickResult, rows: list[_Row]) -> list[_Row]:
        """Rows for this frame's confident detections that no present row covers."""
        from livecam.track.bytetrack import iou_matrix

        present = result.presence >= PRESENCE_THRESHOLD
        covered = [boxes_from_landmarks(result.landmarks_px[present][:, :, :2])]
        valid = result.det_valid[0]
        boxes = result.det_boxes_xyxy[0][valid].astype(np.float32)
        scores = result.det_scores[0][valid].astype(np.float32)
        threshold = self._tracker.settings.high_score_threshold
        room = self.gpu.max_faces - int(present.sum())
        found: list[_Row] = []
        for j in np.argsort(-scores):
            if scores[j] < threshold or len(found) >= room:
                break
            box = boxes[j]
            taken = np.concatenate(covered)
            cx, cy = 0.5 * (box[0] + box[2]), 0.5 * (box[1] + box[3])
            inside = ((taken[:, 0] <= cx) & (cx <= taken[:, 2]) & (taken[:, 1] <= cy)
                      & (cy <= taken[:, 3]))
            if len(taken) and (inside.any() or iou_matrix(box[None], taken).max() > SAME_FACE_IOU):
                continue
            side = float(max(box[2] - box[0], box[3] - box[1])) * ROI_SCALE
            found.append(_Row(np.array([cx, cy, side, 0.0], np.float32), -1, float(scores[j])))
            covered.append(box[None])
        return found

    def _track(self, result: TickResult, rows: list[_Row]) -> Faces:
        """ByteTrack on the rows' meshes; sets the next frame's rows; the frame's Faces."""
        from livecam.analysis.landmarks import six_keypoints
        from livecam.track.bytetrack import iou_matrix

        settings = self._tracker.settings
        # observations: present rows, a row repeating a better one (two ROIs that slid onto
        # one face) dropped; tracked rows first, then by detection score
        order = sorted((i for i in range(len(rows))
                        if result.presence[i] >= PRESENCE_THRESHOLD),
                       key=lambda i: (rows[i].track_id < 0, -rows[i].score))
        kept: list[int] = []
        for i in order:
            box = boxes_from_landmarks(result.landmarks_px[i:i + 1, :, :2])
            if kept and iou_matrix(box, boxes_from_landmarks(
                    result.landmarks_px[kept][:, :, :2])).max() > SAME_FACE_IOU:
                continue
            kept.append(i)
        lm = result.landmarks_px[kept].astype(np.float32)
        boxes = boxes_from_landmarks(lm[:, :, :2])
        scores = np.array([rows[i].score for i in kept], np.float32)
        tracks = self._tracker.update(boxes, scores)
        velocities = self._tracker.velocities_px()
        next_rows: list[_Row] = []
        for tid, det in zip(tracks.track_ids, tracks.det_indices, strict=True):
            i = kept[int(det)]
            vx, vy = velocities.get(int(tid), (0.0, 0.0))
            roi = result.roi_next[i].astype(np.float32) + np.array([vx, vy, 0, 0], np.float32)
            next_rows.append(_Row(roi, int(tid), rows[i].score))
        claimed = {int(d) for d in tracks.det_indices}
        for k, i in enumerate(kept):
            row = rows[i]
            # a face seen once has a track born but not yet confirmed: mesh it once more
            if (k not in claimed and row.unconfirmed == 0
                    and row.score >= settings.new_track_score_threshold):
                next_rows.append(_Row(result.roi_next[i].astype(np.float32), -1, row.score, 1))
        self._rows = next_rows[: self.gpu.max_faces]
        if len(tracks) == 0:
            return Faces.empty()
        picked = lm[tracks.det_indices]
        xy = np.ascontiguousarray(picked[:, :, :2])
        return Faces(boxes_xyxy=boxes_from_landmarks(xy), scores=scores[tracks.det_indices],
                     keypoints_xy=six_keypoints(xy), landmarks_xy=xy,
                     landmarks_z=np.ascontiguousarray(picked[:, :, 2]),
                     track_ids=tracks.track_ids.astype(np.int64))

"""The face follower's networks on the GPU: BlazeFace and MediaPipe's face mesh as torch ports.

:class:`GpuFaceNetworks` offers what the follower asks of its networks (``detect`` the whole
frame, ``landmarks`` on rotated regions; the same protocol as the CPU's MediaPipe models), so
the CPU and GPU paths share one follower: detection cadence, tracking, smoothing, selection,
``max_faces`` and the fail-closed decisions stay in ``livecam.analysis.follower``; only the
networks run here. Frames live in a small ring on the device (:mod:`livecam.analysis.gpu.ring`):
the capture thread loads each frame as it reads it (:meth:`GpuFaceNetworks.preload`: upload
through pinned staging, the detector started at once on a stream of its own), so the
follower's thread finds it on the device with its detections under way; a frame not loaded
ahead is loaded when the follower first asks about it.

Each call returns host arrays, so it ends in one small device-to-host copy and a wait on it:
the follower decides on them before the next call. Shapes are static: the detector sees the
frame size (a CUDA graph per ring slot, captured when the frame size is prepared), the mesh
runs in buckets of 1, 2, 4, ... regions over the ring (the slot's index travels with the
regions), so a call is a few graph replays rather than hundreds of kernel launches from Python.

``refine_landmarks`` (478 points with irises) has no torch port: the mesh then runs on the host
with MediaPipe's graph (the CPU path's landmarker) and only the detector stays on the GPU.

With ``keep_frames`` the ring keeps each frame on the device for that many frames
(:meth:`GpuFaceNetworks.device_frame`), so the GPU swap of the same frame copies it on the
device instead of uploading it again.

On a CPU the same code runs eagerly (CI). The pipeline thread calls everything but
:meth:`GpuFaceNetworks.preload`, which the capture thread calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from livecam.analysis.gpu.calls import (
    CapturedCall,
    frame_detections,
    load_detectors,
    load_mesh,
    load_tile_detector,
    merged_detections,
    mesh_buckets,
    mesh_results,
    on_stream,
    run_detectors,
    run_mesh,
)
from livecam.analysis.gpu.facemesh import NUM_LANDMARKS
from livecam.analysis.gpu.ring import AHEAD, FrameRing, Slot
from livecam.analysis.mesh import MeshResult
from livecam.analysis.roi import Roi
from livecam.core.types import Faces, ImageBGR
from livecam.engines.cuda_streams import new_stream, release_stream

log = logging.getLogger(__name__)


class GpuFaceNetworks:
    """Whole-frame BlazeFace and the face mesh on ``device`` (see the module docstring).

    ``detector_model``: ``short``, ``full`` or ``auto`` (both, merged as on the CPU);
    ``min_score``: the detector's score floor (the tracker's low threshold, as on the CPU);
    ``precision``: ``fp16`` or ``fp32`` for both networks (fp32 on a CPU); ``max_rois``: the
    largest mesh batch (more regions run in several batches); ``models_dir``: MediaPipe's
    ``modules`` folder (None: the installed mediapipe, or ``$LIVECAM_MEDIAPIPE_MODULES``);
    ``keep_frames``: how many frames stay on the device for :meth:`device_frame` (more than
    the frames its stream can have in flight after this one; 0 = none); ``compile_dir``:
    compile the networks (:mod:`livecam.analysis.gpu.compiled`), their code cached there;
    None: run them as they are. ``load_on_capture``: :meth:`preload` loads frames ahead
    (``gpu.load_on_capture``); False: the follower loads each frame itself.
    """

    def __init__(self, *, device: str | torch.device, detector_model: str = "full",
                 min_score: float = 0.5, precision: str = "fp16", max_rois: int = 8,
                 refine_landmarks: bool = False, use_graphs: bool = True,
                 models_dir: str | Path | None = None, keep_frames: int = 0,
                 compile_dir: Path | None = None, load_on_capture: bool = True) -> None:
        if detector_model not in ("short", "full", "auto"):
            raise ValueError(f"detector_model must be short, full or auto, got "
                             f"{detector_model!r}")
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.detector_model = detector_model
        self.min_score = min_score
        self.precision = precision if self.cuda else "fp32"
        self.max_rois = max(1, max_rois)
        self.refine_landmarks = refine_landmarks
        self.use_graphs = use_graphs and self.cuda
        self.models_dir = models_dir
        self.keep_frames = max(0, keep_frames)
        self.compile_dir = compile_dir
        self.load_on_capture = load_on_capture
        #: frames loaded ahead by :meth:`preload`, and those it had no free slot for
        self.loaded_ahead = 0
        self.not_loaded_ahead = 0
        self._tile_detector: Any = None
        self._detectors: list[Any] = []
        self._mesh: Any = None
        self._host_mesh: Any = None  # refine_landmarks: MediaPipe's graph on the host
        self._stream: Any = None  # the follower's: the mesh, and waits for each load
        self._load_stream: Any = None  # uploads and detectors (any thread's)
        self._rings: dict[tuple[int, int], FrameRing] = {}
        self._current: Slot | None = None
        self._current_ring: FrameRing | None = None
        self._current_image: ImageBGR | None = None
        self._mesh_graphs: dict[tuple[tuple[int, int], int], CapturedCall] = {}
        self._rows_host: torch.Tensor | None = None
        self._rows_dev: torch.Tensor | None = None
        self._mesh_out: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._mesh_host: tuple[torch.Tensor, torch.Tensor] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def num_landmarks(self) -> int:
        return 478 if self.refine_landmarks else NUM_LANDMARKS

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16 if self.precision == "fp16" else torch.float32

    def open(self) -> None:
        if self._detectors:
            return
        dtype = self.dtype
        self._detectors = load_detectors(self.detector_model, models_dir=self.models_dir,
                                         min_score=self.min_score, device=self.device,
                                         dtype=dtype, compile_dir=self.compile_dir)
        if self.refine_landmarks:
            from livecam.analysis.mesh import FaceMeshLandmarker

            log.info("analysis.refine_landmarks: the 478-point mesh has no GPU port; it runs "
                     "on the host (MediaPipe), the detector on %s", self.device)
            self._host_mesh = FaceMeshLandmarker(refine_landmarks=True)
            self._host_mesh.open()
        else:
            self._mesh = load_mesh(models_dir=self.models_dir, device=self.device, dtype=dtype,
                                   compile_dir=self.compile_dir)
        if self.cuda:
            # streams of their own (livecam.engines.cuda_streams): torch's pooled ones are
            # shared with the other pipeline streams of the process
            self._stream = new_stream(self.device)
            self._load_stream = new_stream(self.device)
        pinned = self.cuda
        # a region: centre x, y, size, rotation, and the ring slot of its frame
        self._rows_host = torch.zeros((self.max_rois, 5), dtype=torch.float32,
                                      pin_memory=pinned)
        self._rows_dev = torch.zeros((self.max_rois, 5), dtype=torch.float32,
                                     device=self.device)
        self._mesh_host = (torch.zeros((self.max_rois, NUM_LANDMARKS, 3), dtype=torch.float32,
                                       pin_memory=pinned),
                           torch.zeros((self.max_rois,), dtype=torch.float32, pin_memory=pinned))

    def close(self) -> None:
        for ring in self._rings.values():
            ring.close()  # the capture thread queues no more loads
        if self.loaded_ahead or self.not_loaded_ahead:
            log.info("frames loaded on the capture thread: %d; loaded by the face follower "
                     "(no slot free): %d", self.loaded_ahead, self.not_loaded_ahead)
        if self._host_mesh is not None:
            self._host_mesh.close()
        self._host_mesh = None
        self._detectors = []
        self._mesh = None
        self._tile_detector = None
        self._rings.clear()
        self._mesh_graphs.clear()
        self._mesh_out.clear()
        self._current = self._current_ring = self._current_image = None
        for stream in (self._stream, self._load_stream):
            release_stream(stream)
        self._stream = self._load_stream = None

    def tile_detector(self, max_faces: int) -> Any:
        """The tile search's detector (:func:`load_tile_detector`), loaded on first use."""
        if self._tile_detector is None:
            self._tile_detector = load_tile_detector(
                models_dir=self.models_dir, device=self.device, dtype=self.dtype,
                max_faces=max_faces, compile_dir=self.compile_dir)
        return self._tile_detector

    def prepare(self, width_px: int, height_px: int) -> None:
        """Allocate for this frame size and capture its graphs now (CUDA: a few seconds)."""
        ring = self._ring(height_px, width_px)
        if self._mesh is not None:
            for n in mesh_buckets(self.max_rois):
                self._mesh_graph(ring, height_px, width_px, n)

    def _on_stream(self, stream: Any) -> Any:
        return on_stream(stream, self.cuda)

    def _ring(self, height_px: int, width_px: int) -> FrameRing:
        ring = self._rings.get((height_px, width_px))
        if ring is not None:
            return ring
        if not self._detectors:
            raise RuntimeError("GpuFaceNetworks used before open()")
        ring = FrameRing(max(1, self.keep_frames) + AHEAD, height_px, width_px,
                         device=self.device, cuda=self.cuda, keep=self.keep_frames)
        with torch.inference_mode(), self._on_stream(self._load_stream):
            first = [d(ring.slots[0].place) for d in self._detectors]
            shapes = [t for out in first for t in out]
            for slot in ring.slots:
                slot.det_out = tuple(t.clone() for t in shapes)
                slot.det_host = tuple(torch.zeros(t.shape, dtype=t.dtype,
                                                  pin_memory=self.cuda) for t in shapes)

                def detect(slot: Slot = slot) -> None:
                    run_detectors(self._detectors, slot.place, slot.det_out)

                slot.detect = CapturedCall(detect, device=self.device, stream=self._load_stream,
                                           use_graph=self.use_graphs)
        self._rings[(height_px, width_px)] = ring
        return ring

    def _mesh_graph(self, ring: FrameRing, height_px: int, width_px: int,
                    n: int) -> CapturedCall:
        key = ((height_px, width_px), n)
        graph = self._mesh_graphs.get(key)
        if graph is not None:
            return graph
        assert self._rows_dev is not None
        rows = self._rows_dev[:n]
        if n not in self._mesh_out:
            self._mesh_out[n] = (torch.zeros((n, NUM_LANDMARKS, 3), device=self.device),
                                 torch.zeros((n,), device=self.device))
        out_lm, out_presence = self._mesh_out[n]

        def mesh() -> None:  # a graph per size: it reads that size's ring
            run_mesh(self._mesh, ring.frames, rows[:, 4].long(), rows, out_lm, out_presence)

        with torch.inference_mode():
            if self.use_graphs:  # a benign region for the warm-up runs, on the mesh's stream
                benign = torch.tensor([width_px / 2, height_px / 2,
                                       min(width_px, height_px) / 2, 0.0, 0.0])
                with self._on_stream(self._stream):
                    rows.copy_(benign.expand(n, 5))
            graph = CapturedCall(mesh, device=self.device, stream=self._stream,
                                 use_graph=self.use_graphs)
        self._mesh_graphs[key] = graph
        return graph

    # -- per frame ---------------------------------------------------------------------------

    def preload(self, image_bgr: ImageBGR) -> None:
        """Load ``image_bgr`` ahead of the follower: upload it and start its detector. The
        capture thread calls this with each frame as it reads it, before the frame is queued
        (the frame's array must not change after). Does nothing for a frame size not yet
        prepared, or when no slot is free (the follower then loads the frame itself)."""
        if not self.load_on_capture:
            return
        ring = self._rings.get((int(image_bgr.shape[0]), int(image_bgr.shape[1])))
        if ring is None:
            return
        slot = ring.take(image_bgr)
        if slot is None:
            self.not_loaded_ahead += 1
            return
        try:
            self._load(slot, image_bgr)
            self.loaded_ahead += 1
        except Exception as exc:  # the follower loads the frame itself, as without a ring
            ring.drop(slot)
            self.load_on_capture = False
            log.warning("loading frames on the capture thread failed (%s: %s); the face "
                        "follower loads them itself from now on", type(exc).__name__, exc)
        finally:
            slot.loading.release()

    def _load(self, slot: Slot, image_bgr: ImageBGR) -> None:
        """Queue ``image_bgr``'s upload into ``slot`` and its detector (any thread)."""
        if self.cuda:
            slot.loaded.synchronize()  # the staging is free: the last upload from it is done
        np.copyto(slot.staging_np, image_bgr)
        with torch.inference_mode(), self._on_stream(self._load_stream):
            if self.cuda:  # nothing reads the slot's last frame any more
                for event in (*slot.holds, slot.done):
                    self._load_stream.wait_event(event)
            slot.holds.clear()
            slot.place[0].copy_(slot.staging, non_blocking=True)
            if self.cuda:
                slot.loaded.record(self._load_stream)
            assert slot.detect is not None
            slot.detect()
            # one call: each torch call gives the GIL up and waits to get it back
            torch._foreach_copy_(list(slot.det_host), list(slot.det_out), non_blocking=True)
            if self.cuda:
                slot.detected.record(self._load_stream)

    def new_frame(self, image_bgr: ImageBGR) -> None:
        """The follower moves to ``image_bgr``: the frame loaded ahead for it, or loaded now."""
        ring = self._ring(int(image_bgr.shape[0]), int(image_bgr.shape[1]))
        slot, ahead = ring.claim(image_bgr)
        if ahead:
            with slot.loading:  # the capture thread has queued its load
                pass
        else:
            try:
                self._load(slot, image_bgr)
            finally:
                slot.loading.release()
        last = self._current
        if self.cuda:
            with torch.inference_mode(), self._on_stream(self._stream):
                if last is not None:  # the follower's work on the last frame is queued
                    last.done.record(self._stream)
                self._stream.wait_event(slot.loaded)
        self._current, self._current_ring, self._current_image = slot, ring, image_bgr

    def hold_frame_until(self, event: Any) -> None:
        """The current frame's slot is not loaded again before (on the GPU) the CUDA
        ``event``: work on another stream still reads it (a deferred tile search)."""
        if self._current is not None:
            self._current.holds.append(event)

    def device_frame(self, image_bgr: ImageBGR) -> tuple[torch.Tensor, Any] | None:
        """``image_bgr`` on the device for the latest frame: a (H, W, 3) uint8 tensor and the
        CUDA event after which it holds the frame (None on a CPU), or None when that image is
        not the latest frame (or frames are not kept). Valid for ``keep_frames`` frames."""
        slot = self._current
        if not self.keep_frames or slot is None or self._current_image is not image_bgr:
            return None
        return slot.place[0], slot.loaded

    def frame_on_device(self, image_bgr: ImageBGR) -> tuple[torch.Tensor, Any]:
        """``image_bgr`` on the device: its (1, H, W, 3) uint8 tensor (a slot of the ring:
        copy it to keep it) and the CUDA stream after whose queued work it holds the frame
        (None on a CPU): work on another stream waits on it."""
        return self._frame(image_bgr).place, self._stream

    def _frame(self, image_bgr: ImageBGR) -> Slot:
        if self._current is None or self._current_image is not image_bgr:
            self.new_frame(image_bgr)
        assert self._current is not None
        return self._current

    def detect(self, image_bgr: ImageBGR) -> Faces:
        """Faces in the whole frame, best first (boxes, scores, 6 keypoints; ids -1)."""
        slot = self._frame(image_bgr)
        if self.cuda:
            slot.detected.synchronize()
        return merged_detections(frame_detections(slot.det_host, 0))

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        """The mesh in each region (None where its presence is under MediaPipe's floor)."""
        if self._host_mesh is not None:
            return list(self._host_mesh.landmarks(image_bgr, rois))
        if not rois:
            return []
        slot = self._frame(image_bgr)
        assert self._current_ring is not None
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        out: list[MeshResult | None] = []
        for start in range(0, len(rois), self.max_rois):
            out += self._mesh_batch(self._current_ring, slot, h, w,
                                    rois[start:start + self.max_rois])
        return out

    def _mesh_batch(self, ring: FrameRing, slot: Slot, h: int, w: int,
                    rois: Sequence[Roi]) -> list[MeshResult | None]:
        assert self._rows_host is not None and self._rows_dev is not None
        assert self._mesh_host is not None
        n = len(rois)
        bucket = next(b for b in mesh_buckets(self.max_rois) if b >= n)
        rows = self._rows_host.numpy()
        rows[:n] = [(r.center_x_px, r.center_y_px, r.size_px, r.rotation_rad, slot.index)
                    for r in rois]
        rows[n:bucket] = rows[0]  # padding: a real region, results ignored
        graph = self._mesh_graph(ring, h, w, bucket)
        lm_host, presence_host = self._mesh_host
        out_lm, out_presence = self._mesh_out[bucket]
        with torch.inference_mode(), self._on_stream(self._stream):
            self._rows_dev[:bucket].copy_(self._rows_host[:bucket], non_blocking=True)
            graph()
            torch._foreach_copy_([lm_host[:bucket], presence_host[:bucket]],
                                 [out_lm, out_presence], non_blocking=True)
        if self.cuda:
            self._stream.synchronize()
        return mesh_results(lm_host.numpy(), presence_host.numpy(), n)

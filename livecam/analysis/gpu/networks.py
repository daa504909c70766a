"""The face follower's networks on the GPU: BlazeFace and MediaPipe's face mesh as torch ports.

:class:`GpuFaceNetworks` offers what the follower asks of its networks (``detect`` the whole
frame, ``landmarks`` on rotated regions; the same protocol as the CPU's MediaPipe models), so
the CPU and GPU paths share one follower: detection cadence, tracking, smoothing, selection,
``max_faces`` and the fail-closed decisions stay in ``livecam.analysis.follower``; only the
networks run here. Per frame the frame is uploaded once (from the pinned memory the capture
thread put it in, :mod:`livecam.analysis.gpu.host`, or else through pinned staging: one host
copy) and the detector starts on a side stream at once, so it runs beside the first face mesh
call.

Each call returns host arrays, so it ends in one small device-to-host copy and a wait on it:
the follower decides on them before the next call. Shapes are static: the detector sees the
frame size (captured when the frame size is prepared), the mesh runs in buckets of 1, 2, 4, ...
regions (each a CUDA graph on CUDA), so a call is a few graph replays rather than hundreds of
kernel launches from Python.

``refine_landmarks`` (478 points with irises) has no torch port: the mesh then runs on the host
with MediaPipe's graph (the CPU path's landmarker) and only the detector stays on the GPU.

With ``keep_frames`` the uploaded frames are also kept on the device for that many frames
(:meth:`GpuFaceNetworks.device_frame`), so the GPU swap of the same frame copies it on the
device instead of uploading it again.

On a CPU the same code runs eagerly (CI). One thread (the pipeline thread) calls everything.
"""

from __future__ import annotations

import functools
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
    wait_done,
)
from livecam.analysis.gpu.facemesh import NUM_LANDMARKS
from livecam.analysis.gpu.host import pinned_copy, pinned_tensor
from livecam.analysis.mesh import MeshResult
from livecam.analysis.roi import Roi
from livecam.core.types import Faces, ImageBGR
from livecam.engines.cuda_streams import new_stream, release_stream

log = logging.getLogger(__name__)

class _SizeState:
    """Everything sized for one frame size: pinned staging, the device frame, the detector's
    outputs and graph."""

    def __init__(self, height_px: int, width_px: int, device: torch.device, cuda: bool) -> None:
        self.frame_host = torch.zeros((1, height_px, width_px, 3), dtype=torch.uint8,
                                      pin_memory=cuda)
        self.frame_dev = torch.zeros((1, height_px, width_px, 3), dtype=torch.uint8,
                                     device=device)
        # the detector's graph, one per kept frame (each also copies the frame there)
        self.detect: list[CapturedCall] = []
        self.det_out: tuple[torch.Tensor, ...] = ()
        self.det_host: tuple[torch.Tensor, ...] = ()
        self.kept: list[torch.Tensor] = []  # the last frames, for the swap (keep_frames)
        self.kept_ready: list[Any] = []  # their events (CUDA): copied once these complete
        self.next_kept = 0


class GpuFaceNetworks:
    """Whole-frame BlazeFace and the face mesh on ``device`` (see the module docstring).

    ``detector_model``: ``short``, ``full`` or ``auto`` (both, merged as on the CPU);
    ``min_score``: the detector's score floor (the tracker's low threshold, as on the CPU);
    ``precision``: ``fp16`` or ``fp32`` for both networks (fp32 on a CPU); ``max_rois``: the
    largest mesh batch (more regions run in several batches); ``models_dir``: MediaPipe's
    ``modules`` folder (None: the installed mediapipe, or ``$LIVECAM_MEDIAPIPE_MODULES``);
    ``keep_frames``: how many uploaded frames stay on the device for :meth:`device_frame`
    (more than the frames its stream can have in flight after this one; 0 = none);
    ``compile_dir``: compile the networks (:mod:`livecam.analysis.gpu.compiled`), their code
    cached there; None: run them as they are. ``pinned_capture`` (CUDA): ``host_frames``
    is :func:`~livecam.analysis.gpu.host.pinned_copy`, so the capture thread puts each frame
    in pinned memory and it is uploaded from there (any other frame through the staging).
    """

    def __init__(self, *, device: str | torch.device, detector_model: str = "full",
                 min_score: float = 0.5, precision: str = "fp16", max_rois: int = 8,
                 refine_landmarks: bool = False, use_graphs: bool = True,
                 models_dir: str | Path | None = None, keep_frames: int = 0,
                 compile_dir: Path | None = None, pinned_capture: bool = False) -> None:
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
        #: the capture thread's copy of each frame into pinned memory (the analysis stage's
        #: ``host_frames``), or None: frames are copied into the staging here
        self.host_frames = pinned_copy if pinned_capture and self.cuda else None
        self._tile_detector: Any = None
        self._kept_for: tuple[ImageBGR, torch.Tensor, Any] | None = None
        self._detectors: list[Any] = []
        self._mesh: Any = None
        self._host_mesh: Any = None  # refine_landmarks: MediaPipe's graph on the host
        self._stream: Any = None
        self._side: Any = None
        self._detected: Any = None  # the latest frame's detections are on the host after it
        self._detected_alone: Any = None  # that event when no frame is kept
        self._side_unwaited = False  # the side stream's work on the last frame: no one waited
        self._uploaded: Any = None  # the last frame's upload has left the pinned staging
        self._holds: list[Any] = []  # CUDA events the next upload waits for
        self._sizes: dict[tuple[int, int], _SizeState] = {}
        self._current: _SizeState | None = None
        self._current_image: ImageBGR | None = None
        self._mesh_graphs: dict[tuple[tuple[int, int], int], CapturedCall] = {}
        self._roi_host: torch.Tensor | None = None
        self._roi_dev: torch.Tensor | None = None
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
            # shared with the other pipeline streams of the process; urgent: this thread
            # waits for each result, the swap's ticks wait for nobody
            self._stream = new_stream(self.device, urgent=True)
            self._side = new_stream(self.device, urgent=True)
            self._detected_alone = torch.cuda.Event()
            self._detected = self._detected_alone
            self._uploaded = torch.cuda.Event()
        pinned = self.cuda
        self._roi_host = torch.zeros((self.max_rois, 4), dtype=torch.float32, pin_memory=pinned)
        self._roi_dev = torch.zeros((self.max_rois, 4), dtype=torch.float32, device=self.device)
        self._mesh_host = (torch.zeros((self.max_rois, NUM_LANDMARKS, 3), dtype=torch.float32,
                                       pin_memory=pinned),
                           torch.zeros((self.max_rois,), dtype=torch.float32, pin_memory=pinned))

    def close(self) -> None:
        if self._host_mesh is not None:
            self._host_mesh.close()
        self._host_mesh = None
        self._detectors = []
        self._mesh = None
        self._tile_detector = None
        self._sizes.clear()
        self._mesh_graphs.clear()
        self._mesh_out.clear()
        self._current = None
        self._current_image = None
        self._kept_for = None
        for stream in (self._stream, self._side):
            release_stream(stream)
        self._stream = self._side = None

    def tile_detector(self, max_faces: int) -> Any:
        """The tile search's detector (:func:`load_tile_detector`), loaded on first use."""
        if self._tile_detector is None:
            self._tile_detector = load_tile_detector(
                models_dir=self.models_dir, device=self.device, dtype=self.dtype,
                max_faces=max_faces, compile_dir=self.compile_dir)
        return self._tile_detector

    def prepare(self, width_px: int, height_px: int) -> None:
        """Allocate for this frame size and capture its graphs now (CUDA: a few seconds)."""
        state = self._size(height_px, width_px)
        if self._mesh is not None:
            for n in mesh_buckets(self.max_rois):
                self._mesh_graph(state, height_px, width_px, n)

    def _on_stream(self, stream: Any) -> Any:
        return on_stream(stream, self.cuda)

    def _size(self, height_px: int, width_px: int) -> _SizeState:
        state = self._sizes.get((height_px, width_px))
        if state is not None:
            return state
        if not self._detectors:
            raise RuntimeError("GpuFaceNetworks used before open()")
        state = _SizeState(height_px, width_px, self.device, self.cuda)

        def detect(kept: torch.Tensor | None) -> None:
            # inside the graph with the detector: the frame's copy kept for the swap and the
            # outputs' copy to the host (each torch call on the follower's thread gives the
            # GIL up and queues to get it back: device runs 66 and 89)
            if kept is not None:
                kept.copy_(state.frame_dev[0])
            run_detectors(self._detectors, state.frame_dev, state.det_out)
            torch._foreach_copy_(list(state.det_host), list(state.det_out), non_blocking=True)

        with torch.inference_mode(), self._on_stream(self._side):
            first = [d(state.frame_dev) for d in self._detectors]
            state.det_out = tuple(t.clone() for out in first for t in out)
        state.det_host = tuple(torch.zeros(t.shape, dtype=t.dtype, pin_memory=self.cuda)
                               for t in state.det_out)
        state.kept = [torch.zeros((height_px, width_px, 3), dtype=torch.uint8,
                                  device=self.device) for _ in range(self.keep_frames)]
        state.kept_ready = [torch.cuda.Event() if self.cuda else None
                            for _ in range(self.keep_frames)]
        targets: list[torch.Tensor | None] = list(state.kept) or [None]
        with torch.inference_mode():
            state.detect = [CapturedCall(functools.partial(detect, kept), device=self.device,
                                         stream=self._side, use_graph=self.use_graphs)
                            for kept in targets]
        self._sizes[(height_px, width_px)] = state
        return state

    def _mesh_graph(self, state: _SizeState, height_px: int, width_px: int,
                    n: int) -> CapturedCall:
        key = ((height_px, width_px), n)
        graph = self._mesh_graphs.get(key)
        if graph is not None:
            return graph
        assert self._roi_dev is not None and self._roi_host is not None
        assert self._mesh_host is not None
        roi_host, roi = self._roi_host[:n], self._roi_dev[:n]
        index = torch.zeros(n, dtype=torch.long, device=self.device)
        if n not in self._mesh_out:
            self._mesh_out[n] = (torch.zeros((n, NUM_LANDMARKS, 3), device=self.device),
                                 torch.zeros((n,), device=self.device))
        out_lm, out_presence = self._mesh_out[n]
        host_out = [t[:n] for t in self._mesh_host]
        # a graph per size: it reads that size's device frame. The regions' upload and the
        # outputs' download are in it (pinned memory at fixed places), so a call is one
        # replay and one wait: each torch call on the follower's thread gives the GIL up and
        # queues to get it back (device runs 66 and 89)

        def mesh() -> None:
            roi.copy_(roi_host, non_blocking=True)
            run_mesh(self._mesh, state.frame_dev, index, roi, out_lm, out_presence)
            torch._foreach_copy_(host_out, [out_lm, out_presence], non_blocking=True)

        with torch.inference_mode():
            if self.use_graphs:  # a benign region for the warm-up runs
                roi_host[:] = torch.tensor([width_px / 2, height_px / 2,
                                           min(width_px, height_px) / 2, 0.0])
            graph = CapturedCall(mesh, device=self.device, stream=self._stream,
                           use_graph=self.use_graphs)
        self._mesh_graphs[key] = graph
        return graph

    # -- per frame ---------------------------------------------------------------------------

    def new_frame(self, image_bgr: ImageBGR) -> None:
        """A new frame starts: upload it once and start the detector beside what follows."""
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        state = self._size(h, w)
        # a frame the capture thread put in pinned memory goes up from there
        source = pinned_tensor(image_bgr) if self.host_frames is not None else None
        if source is None:
            if self.cuda:
                wait_done(self._uploaded)  # the staging is free (the last copy is done)
            np.copyto(state.frame_host.numpy()[0], image_bgr)
            source = state.frame_host
        with torch.inference_mode():
            with self._on_stream(self._stream):
                for event in self._holds:  # a deferred reader of the last frame is done
                    self._stream.wait_event(event)
                self._holds.clear()
                if self._side_unwaited:  # the last frame's detector may still read it
                    self._stream.wait_event(self._detected)
                state.frame_dev.copy_(source, non_blocking=True)
                if self.cuda and source is state.frame_host:  # the staging is read
                    self._uploaded.record(self._stream)
            if self.cuda:
                self._side.wait_stream(self._stream)
            k = state.next_kept
            with self._on_stream(self._side):
                state.detect[k]()  # the detector, its outputs down, the frame kept
                if self.cuda:
                    self._detected = (state.kept_ready[k] if state.kept
                                      else self._detected_alone)
                    self._detected.record(self._side)
                    self._side_unwaited = True
            if state.kept:
                state.next_kept = (k + 1) % len(state.kept)
                self._kept_for = (image_bgr, state.kept[k], self._detected)
        self._current, self._current_image = state, image_bgr

    def hold_frame_until(self, event: Any) -> None:
        """The next frame's upload waits (on the GPU) for the CUDA ``event``: work on another
        stream still reads the current frame's device tensor (a deferred tile search)."""
        self._holds.append(event)

    def device_frame(self, image_bgr: ImageBGR) -> tuple[torch.Tensor, Any] | None:
        """``image_bgr`` as uploaded for the latest frame: a device (H, W, 3) uint8 tensor and
        the CUDA event after which it holds the frame (None on a CPU), or None when that
        image is not the latest upload (or frames are not kept). Valid for ``keep_frames``
        frames."""
        kept = self._kept_for
        if kept is None or kept[0] is not image_bgr:
            return None
        return kept[1], kept[2]

    def frame_on_device(self, image_bgr: ImageBGR) -> tuple[torch.Tensor, Any]:
        """``image_bgr`` on the device, uploaded once per frame: its (1, H, W, 3) uint8 tensor
        (the same tensor for every frame of this size, so a CUDA graph can read it) and the
        CUDA stream its upload runs on (None on a CPU): work on another stream waits on it."""
        return self._frame(image_bgr).frame_dev, self._stream

    def _frame(self, image_bgr: ImageBGR) -> _SizeState:
        if self._current is None or self._current_image is not image_bgr:
            self.new_frame(image_bgr)
        assert self._current is not None
        return self._current

    def detect(self, image_bgr: ImageBGR) -> Faces:
        """Faces in the whole frame, best first (boxes, scores, 6 keypoints; ids -1)."""
        state = self._frame(image_bgr)
        if self.cuda:
            wait_done(self._detected)  # mostly done: it ran beside the mesh
            self._side_unwaited = False
        return merged_detections(frame_detections(state.det_host, 0))

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        """The mesh in each region (None where its presence is under MediaPipe's floor)."""
        if self._host_mesh is not None:
            return list(self._host_mesh.landmarks(image_bgr, rois))
        if not rois:
            return []
        state = self._frame(image_bgr)
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        out: list[MeshResult | None] = []
        for start in range(0, len(rois), self.max_rois):
            out += self._mesh_batch(state, h, w, rois[start:start + self.max_rois])
        return out

    def _mesh_batch(self, state: _SizeState, h: int, w: int,
                    rois: Sequence[Roi]) -> list[MeshResult | None]:
        assert self._roi_host is not None and self._roi_dev is not None
        assert self._mesh_host is not None
        n = len(rois)
        bucket = next(b for b in mesh_buckets(self.max_rois) if b >= n)
        # first: a graph captured now writes its warm-up region into the rows
        graph = self._mesh_graph(state, h, w, bucket)
        rows = self._roi_host.numpy()
        rows[:n] = [(r.center_x_px, r.center_y_px, r.size_px, r.rotation_rad) for r in rois]
        rows[n:bucket] = rows[0]  # padding: a real region, results ignored
        lm_host, presence_host = self._mesh_host
        with torch.inference_mode(), self._on_stream(self._stream):
            graph()  # uploads the rows, runs the mesh, downloads its outputs
        if self.cuda:
            self._stream.synchronize()
        return mesh_results(lm_host.numpy(), presence_host.numpy(), n)

"""The face follower's GPU networks: BlazeFace and MediaPipe's face mesh as torch ports,
shared by the streams of one process (one stream too), batched as calls come.

Each stream's :class:`~livecam.gpupipe.networks.client.StreamFaceNetworks` offers what the
follower asks of its networks (``detect`` the whole frame, ``landmarks`` on rotated regions:
:class:`livecam.analysis.networks.FaceNetworks`, the CPU's MediaPipe models' protocol), so the
CPU and GPU paths share one follower; only the networks run here. One class serves one stream
and many, so a start of any number of streams compiles and captures the same shapes
(:mod:`livecam.gpupipe.shapes`): one stream's calls are batches of one frame.

Run per stream, BlazeFace and the face mesh at batch 1 are a few hundred tiny kernels a frame,
bound by launches, about 1.4 ms of the H200's time for each 1080p frame. Here every stream
uploads its frame into its own place of one stacked device tensor, and the streams' calls are
served in batches: a caller that finds nothing running runs its call at once (nothing added
to its wait), and the calls that arrive while a batch runs are served together by the next
one, which one of their callers runs (:class:`~livecam.gpupipe.networks.batching.Batcher`). A
batch is one detector call over the frames that asked (1, 2, 4, ... frames, gathered by
index; a CUDA graph each) beside one mesh call over all their regions (buckets as well).

Each stream gets a :class:`~livecam.gpupipe.networks.client.StreamFaceNetworks` from
:meth:`SharedFaceNetworks.slot_for`. It offers ``detect``, ``landmarks``,
``frame_on_device``, ``device_frame`` and ``hold_frame_until``, so the follower, the tile
search and the swap work the same for one stream or many. A stream's first mesh call of a
frame also asks for the frame's detections
(``detect_ahead``: the follower asks for both each frame with
``advanced.analysis.detect_each_frame``), so the detector still runs beside the mesh. On a CPU the
same code runs eagerly (CI).

``refine_landmarks`` (478 points with irises) has no torch port: each stream's mesh then runs
on the host with MediaPipe's graph (the CPU path's landmarker) and only the detector is shared
here.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from livecam.analysis.roi import Roi
from livecam.core.shared_open import SharedOpen
from livecam.engines.cuda_streams import new_stream, release_stream
from livecam.gpupipe.networks.batching import Batcher, Request, upload_events
from livecam.gpupipe.networks.calls import (
    CapturedCall,
    Detection,
    FrameStack,
    batch_detections,
    load_detectors,
    load_mesh,
    load_tile_detector,
    mesh_buckets,
    mesh_results,
    on_stream,
    run_detectors,
    run_mesh,
    wait_done,
)
from livecam.gpupipe.networks.client import StreamFaceNetworks
from livecam.gpupipe.networks.facemesh import NUM_LANDMARKS
from livecam.gpupipe.networks.tiles import TileBatches

log = logging.getLogger(__name__)

#: The most face regions one mesh graph takes (more run as several batches).
MAX_MESH_BATCH = 64  # livecam.gpupipe.shapes.MAX_MESH_BATCH (a layer above) says the same


class SharedFaceNetworks:
    """BlazeFace and the face mesh for ``n_streams`` streams (see the module docstring).

    ``detector_model``: ``short``, ``full`` or ``auto`` (both, merged as on the CPU);
    ``min_score``: the detector's score floor (the tracker's low threshold, as on the CPU);
    ``precision``: ``fp16`` or ``fp32`` for both networks (fp32 on a CPU); ``max_rois``: one
    stream's regions per call; ``models_dir``: MediaPipe's ``modules`` folder (None: the
    installed mediapipe, or ``$LIVECAM_MEDIAPIPE_MODULES``); ``compile_dir``: compile the
    networks (:mod:`livecam.gpupipe.networks.compiled`), their code cached there (None: as they
    are); ``refine_landmarks``: no mesh here (each stream's runs on the host);
    ``dynamic_batches``: the compiled mesh and detector take any region or frame count from
    two up in one compiled call (:func:`~livecam.gpupipe.networks.calls.load_mesh`).
    ``stack_frames``: the depth of the stacked frames (default ``n_streams``; the pipeline passes
    ``advanced.pipeline.max_streams``, so the compiled shapes do not change with the streams
    started); ``frames_per_call``: the most frames one detector call takes (default the depth; more
    run as several calls). Streams call
    :meth:`acquire`/:meth:`release` (their clients' ``open``/``close``): the first opens the
    models, the last closes them."""

    def __init__(self, *, device: str | torch.device, n_streams: int,
                 detector_model: str = "full", min_score: float = 0.5,
                 precision: str = "fp16", max_rois: int = 8, use_graphs: bool = True,
                 models_dir: str | Path | None = None,
                 compile_dir: Path | None = None, stack_frames: int | None = None,
                 frames_per_call: int | None = None, refine_landmarks: bool = False,
                 dynamic_batches: bool = False) -> None:
        if detector_model not in ("short", "full", "auto"):
            raise ValueError(f"detector_model must be short, full or auto, got "
                             f"{detector_model!r}")
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.n_streams = max(1, n_streams)
        self.stack_frames = max(self.n_streams, stack_frames or self.n_streams)
        self.frames_per_call = max(1, min(frames_per_call or self.stack_frames,
                                          self.stack_frames))
        self.detector_model = detector_model
        self.min_score = min_score
        self.precision = precision if self.cuda else "fp32"
        self.max_rois = max(1, max_rois)
        self.refine_landmarks = refine_landmarks
        self.dynamic_batches = dynamic_batches
        self.max_mesh = min(MAX_MESH_BATCH, self.frames_per_call * self.max_rois)
        self.use_graphs = use_graphs and self.cuda
        self.models_dir = models_dir
        self.compile_dir = compile_dir
        self.batcher = Batcher(self._run)
        self._lock = threading.Lock()
        self._users = SharedOpen(self._lock)
        self._detectors: list[Any] = []
        self._mesh: Any = None
        self._tile_detector: Any = None
        self._tile_batches: TileBatches | None = None
        self._stream: Any = None
        self._side: Any = None
        self._stacks: dict[tuple[int, int], FrameStack] = {}
        #: the stacks of pictures built on the device (:meth:`picture_stack`), apart from the
        #: frames' even where a size is the same: a frame's stack has the mesh, a picture's not
        self._picture_stacks: dict[tuple[int, int], FrameStack] = {}
        self._rows_host = self._rows_dev = torch.zeros(0)
        self._mesh_host: tuple[torch.Tensor, torch.Tensor] = (torch.zeros(0), torch.zeros(0))
        #: the host buffers' numpy views, made once each (:meth:`_numpy`)
        self._views: dict[int, tuple[torch.Tensor, np.ndarray]] = {}

    def slot_for(self, stream: int, *, detect_ahead: bool = True, keep_frames: int = 0,
                 pinned_capture: bool = False) -> StreamFaceNetworks:
        """Stream ``stream``'s networks, in place ``stream`` of the stacked frames (a rebuilt
        stage chain of the same stream takes the same place: only one chain of a stream runs
        frames at a time). ``detect_ahead``: a frame's first mesh call asks for its detections
        too; ``keep_frames``: how many uploaded frames stay on the device for the swap
        (:meth:`StreamFaceNetworks.device_frame`; more than the frames the stream can have in
        flight after this one; 0 = none); ``pinned_capture`` (CUDA): the capture thread puts
        each frame in pinned memory (:func:`~livecam.gpupipe.networks.host.pinned_copy`) and it is
        uploaded from there."""
        if not 0 <= stream < self.n_streams:
            raise ValueError(f"stream {stream} is not one of {self.n_streams}")
        return StreamFaceNetworks(self, stream, detect_ahead=detect_ahead,
                                  keep_frames=keep_frames, pinned_capture=pinned_capture)

    # -- lifecycle ---------------------------------------------------------------------------

    def tile_detector(self, max_faces: int) -> Any:
        """The tile search's detector, one for every stream (compiled once), loaded on first
        use."""
        with self._lock:
            if self._tile_detector is None:
                self._tile_detector = load_tile_detector(
                    models_dir=self.models_dir, device=self.device, dtype=self.dtype,
                    max_faces=max_faces, compile_dir=self.compile_dir)
            return self._tile_detector

    def tile_batches(self, max_faces: int) -> TileBatches:
        """The streams' one tile search batch per frame size (:class:`TileBatches`, on the
        detector of :meth:`tile_detector`), made on first use."""
        detector = self.tile_detector(max_faces)
        with self._lock:
            if self._tile_batches is None:
                self._tile_batches = TileBatches(detector, device=self.device,
                                                 use_graphs=self.use_graphs)
            return self._tile_batches

    def acquire(self) -> None:
        self._users.acquire(lambda: bool(self._detectors), self._open)

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16 if self.precision == "fp16" else torch.float32

    def _open(self) -> None:
        dtype = self.dtype
        self._detectors = load_detectors(self.detector_model, models_dir=self.models_dir,
                                         min_score=self.min_score, device=self.device,
                                         dtype=dtype, compile_dir=self.compile_dir,
                                         dynamic_batches=self.dynamic_batches)
        if not self.refine_landmarks:
            self._mesh = load_mesh(models_dir=self.models_dir, device=self.device, dtype=dtype,
                                   compile_dir=self.compile_dir,
                                   dynamic_batches=self.dynamic_batches)
        if self.cuda:
            self._stream = new_stream(self.device, urgent=True)
            self._side = new_stream(self.device, urgent=True)
        pinned, m = self.cuda, self.max_mesh
        self._rows_host = torch.zeros((m, 5), dtype=torch.float32, pin_memory=pinned)
        self._rows_dev = torch.zeros((m, 5), dtype=torch.float32, device=self.device)
        self._mesh_host = (torch.zeros((m, NUM_LANDMARKS, 3), pin_memory=pinned),
                           torch.zeros((m,), pin_memory=pinned))
        log.info("face detector (%s) and face mesh on %s shared by %d streams: their calls "
                 "are batched (up to %d frames and %d regions a call)", self.detector_model,
                 self.device, self.n_streams, self.frames_per_call, self.max_mesh)

    def release(self) -> None:
        with self._users.releasing() as last:
            if not last:
                return
            with self.batcher.exclusive():
                self._detectors = []
                self._mesh = None
                self._tile_detector = None
                if self._tile_batches is not None:
                    self._tile_batches.close()
                    self._tile_batches = None
                self._stacks.clear()
                self._picture_stacks.clear()
                self._views.clear()
                for stream in (self._stream, self._side):
                    release_stream(stream)
                self._stream = self._side = None

    def on_stream(self, stream: Any) -> Any:
        return on_stream(stream, self.cuda)

    def stack(self, height_px: int, width_px: int) -> FrameStack:
        """The stacked frames of this size (made, and its graphs captured, on first use: every
        stream's ``prepare`` does it before frames flow; a stream whose frame size changes
        later holds every stream's calls while its graphs are captured, on CUDA a second or
        two)."""
        return self._made(self._stacks, height_px, width_px, with_mesh=True)

    def picture_stack(self, height_px: int, width_px: int, per_stream: int = 1) -> FrameStack:
        """The stacked pictures of this size that a stream builds on the device (the edge
        search's strips, a second look): the plain detector (a compiled network's ``module``:
        a new picture size compiles nothing) in CUDA graphs, and no mesh. Each stream's
        ``prepare_pictures`` makes them for its frame size's pictures before frames flow: made
        on a stream's thread, a stack's first eager calls took 12 s on an H100 (cuDNN sets
        each convolution up again for each thread), and eager, each call costs 13 ms of the
        host against a graph's replay. ``per_stream`` places for each stream (a frame's
        pictures of one size, detected in one call; the first call of a size sets it). Their
        requests say ``picture``."""
        return self._made(self._picture_stacks, height_px, width_px, with_mesh=False,
                          per_stream=per_stream)

    def _made(self, stacks: dict[tuple[int, int], FrameStack], height_px: int, width_px: int,
              *, with_mesh: bool, per_stream: int = 1) -> FrameStack:
        """``stacks``' stack of this size, made on first use with no batch running."""
        stack = stacks.get((height_px, width_px))
        if stack is not None:
            return stack
        with self._lock, self.batcher.exclusive():
            stack = stacks.get((height_px, width_px))
            if stack is None:
                if not self._detectors:
                    raise RuntimeError("SharedFaceNetworks used before acquire()")
                stack = self._capture(height_px, width_px, with_mesh=with_mesh,
                                      per_stream=per_stream)
                stacks[(height_px, width_px)] = stack
            return stack

    def _capture(self, height_px: int, width_px: int, *, with_mesh: bool = True,
                 per_stream: int = 1) -> FrameStack:
        """The stack's graphs. Each takes its inputs up from and its outputs down to pinned
        memory at fixed places inside the graph, so a batch is a replay and a wait: each torch
        call outside the graph, on the thread running a batch, gives the GIL up and queues to
        get it back. Without ``with_mesh`` (pictures): the plain detector's graphs only."""
        # pictures: batches of the streams started with, not of every place the stack
        # holds (advanced.pipeline.max_streams): a lone 1080p stream's graphs of up to 512
        # pictures took 5.6 GB more on an H100 than one picture a call; streams added later
        # have their pictures run in more calls
        frames = self.frames_per_call if with_mesh else min(self.frames_per_call,
                                                              self.n_streams)
        per_call = frames * per_stream
        stack = FrameStack(self.stack_frames, height_px, width_px, self.device,
                           per_call=per_call, per_stream=per_stream)
        # pictures: the plain modules, not their compiled calls (a new size would compile)
        detectors = self._detectors if with_mesh else [getattr(d, "module", d)
                                                  for d in self._detectors]
        with torch.inference_mode():
            outs_of: dict[int, tuple[torch.Tensor, ...]] = {}
            # pictures: whole frames' worth of them (a lone stream's strips: one bucket, not
            # 1, 2, 4 and 8 pictures; each new batch size costs seconds of cuDNN set-up)
            for b in (per_stream * f for f in mesh_buckets(frames)):
                with self.on_stream(self._side):
                    first = [d(stack.frames, None, stack.index_dev[:b]) for d in detectors]
                outs_of[b] = tuple(t.clone() for found in first for t in found)
            stack.det_host = tuple(torch.zeros(t.shape, dtype=t.dtype, pin_memory=self.cuda)
                                   for t in outs_of[max(outs_of)])
            for b, outs in outs_of.items():

                def detect(b: int = b, outs: tuple[torch.Tensor, ...] = outs) -> None:
                    index = stack.index_dev[:b]
                    index.copy_(stack.index_host[:b], non_blocking=True)
                    run_detectors(detectors, stack.frames, outs, index)
                    torch._foreach_copy_([d[:b] for d in stack.det_host], list(outs),
                                         non_blocking=True)

                stack.detect[b] = CapturedCall(detect, device=self.device, stream=self._side,
                                               use_graph=self.use_graphs)
            if not with_mesh:
                return stack
            benign = torch.tensor([width_px / 2, height_px / 2,
                                   min(width_px, height_px) / 2, 0.0, 0.0])
            for b in mesh_buckets(self.max_mesh) if self._mesh is not None else ():
                out_lm = torch.zeros((b, NUM_LANDMARKS, 3), device=self.device)
                out_presence = torch.zeros((b,), device=self.device)

                def mesh(b: int = b, out_lm: torch.Tensor = out_lm,
                         out_presence: torch.Tensor = out_presence) -> None:
                    rows = self._rows_dev[:b]
                    rows.copy_(self._rows_host[:b], non_blocking=True)
                    run_mesh(self._mesh, stack.frames, rows[:, 4].long(), rows, out_lm,
                             out_presence)
                    torch._foreach_copy_([t[:b] for t in self._mesh_host],
                                         [out_lm, out_presence], non_blocking=True)

                # a benign region for the warm-up runs (no batch runs while graphs are made)
                self._rows_host[:b] = benign.expand(b, 5)
                stack.mesh[b] = CapturedCall(mesh, device=self.device, stream=self._stream,
                                             use_graph=self.use_graphs)
        return stack

    # -- batches -----------------------------------------------------------------------------

    def _run(self, batch: list[Request]) -> None:
        """Run a batch (the calling thread is the only one running one)."""
        by_size: dict[tuple[bool, tuple[int, int]], list[Request]] = {}
        for request in batch:
            by_size.setdefault((request.picture, request.size), []).append(request)
        with torch.inference_mode():
            for (picture, size), requests in by_size.items():
                stacks = self._picture_stacks if picture else self._stacks
                self._run_size(stacks[size], requests)

    def _run_size(self, stack: FrameStack, requests: list[Request]) -> None:
        with self.on_stream(self._stream):
            for event in upload_events(requests):
                self._stream.wait_event(event)
        if self.cuda:
            self._side.wait_stream(self._stream)
        detect = [r for r in requests if r.detect]
        per_call = stack.per_call
        while len(detect) > per_call:  # all but the last call's frames: one call at a time
            first, detect = detect[:per_call], detect[per_call:]
            self._launch_detect(stack, [r.slot for r in first])
            if self.cuda:
                wait_done(self._side)
            for r, found in zip(first, self._detections(stack, len(first)), strict=True):
                r.found = found
        if detect:  # the last frames' call runs beside the mesh
            self._launch_detect(stack, [r.slot for r in detect])
        regions = [(r, roi) for r in requests for roi in r.rois]
        for start in range(0, len(regions), self.max_mesh):
            chunk = regions[start:start + self.max_mesh]
            lm, presence = self._mesh_chunk(stack, chunk)
            results = mesh_results(lm, presence, len(chunk))
            for (r, _), result in zip(chunk, results, strict=True):
                r.meshes.append(result)
        if detect:
            if self.cuda:
                wait_done(self._side)  # mostly done: it ran beside the mesh
            for r, found in zip(detect, self._detections(stack, len(detect)), strict=True):
                r.found = found

    def _numpy(self, tensor: torch.Tensor) -> np.ndarray:
        """``tensor.numpy()`` (a host buffer the graphs read or write), made once: each
        batch read and wrote eight of them, each a tensor call on the thread running every
        stream's batch."""
        view = self._views.get(id(tensor))
        if view is None or view[0] is not tensor:
            view = self._views[id(tensor)] = (tensor, tensor.numpy())
        return view[1]

    def _detections(self, stack: FrameStack, frames: int) -> list[list[Detection]]:
        return batch_detections([self._numpy(t) for t in stack.det_host], frames)

    def _launch_detect(self, stack: FrameStack, slots: list[int]) -> None:
        bucket = next(b for b in stack.detect if b >= len(slots))
        index = self._numpy(stack.index_host)
        index[:len(slots)] = slots
        index[len(slots):bucket] = slots[0]  # padding: a real frame, results ignored
        with self.on_stream(self._side):
            stack.detect[bucket]()  # uploads the frames' indices, detects, downloads the detections

    def _mesh_chunk(self, stack: FrameStack, chunk: list[tuple[Request, Roi]]
                    ) -> tuple[np.ndarray, np.ndarray]:
        n = len(chunk)
        bucket = next(b for b in stack.mesh if b >= n)
        rows = self._numpy(self._rows_host)
        rows[:n] = [(roi.center_x_px, roi.center_y_px, roi.size_px, roi.rotation_rad, r.slot)
                    for r, roi in chunk]
        rows[n:bucket] = rows[0]  # padding: a real region, results ignored
        lm_host, presence_host = self._mesh_host
        with self.on_stream(self._stream):
            stack.mesh[bucket]()  # uploads the rows, runs the mesh, downloads its outputs
        if self.cuda:
            self._stream.synchronize()
        return self._numpy(lm_host), self._numpy(presence_host)


def one_stream(*, detect_ahead: bool = True, keep_frames: int = 0,
               pinned_capture: bool = False, **options: Any) -> StreamFaceNetworks:
    """One stream's networks on a :class:`SharedFaceNetworks` of its own (``options``: its
    arguments, ``n_streams`` 1; the others as :meth:`SharedFaceNetworks.slot_for`'s)."""
    return SharedFaceNetworks(n_streams=1, **options).slot_for(
        0, detect_ahead=detect_ahead, keep_frames=keep_frames, pinned_capture=pinned_capture)

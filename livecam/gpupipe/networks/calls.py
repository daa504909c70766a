"""The face networks' calls (:class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`): the
detector and mesh runs a CUDA graph captures (:class:`CapturedCall`, into fixed outputs),
the region buckets, and the host-side reading of their outputs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from livecam.analysis.mesh import MIN_PRESENCE, MeshResult
from livecam.core.types import Faces
from livecam.gpupipe.networks.compiled import compiled_once
from livecam.gpupipe.networks.facemesh import FaceRois

#: Detector output slots per frame (faces beyond the best this many are not reported).
MAX_DETECTIONS = 64

#: One detection on the host: box (4,) xyxy px, score, keypoints (6, 2) px.
Detection = tuple[np.ndarray, float, np.ndarray]


def load_detectors(detector_model: str, *, models_dir: Any, min_score: float,
                   device: torch.device, dtype: torch.dtype,
                   compile_dir: Path | None = None, dynamic_batches: bool = False) -> list[Any]:
    """BlazeFace for ``detector_model`` (``short``, ``full``, or ``auto``: both, merged by
    :func:`merged_detections`) on ``device`` in ``dtype``, ``MAX_DETECTIONS`` slots a frame;
    compiled, its code cached in ``compile_dir``, unless that is None (then a new module
    each call; compiled, one per process: :func:`compiled_once`). ``dynamic_batches``:
    compiled once for one frame and once for any count from two up
    (:mod:`livecam.gpupipe.networks.dynamic_rows`: the frame index, argument 2 of
    :func:`run_detectors`' call)."""
    from livecam.gpupipe.networks.models import load_blazeface

    def make(range_name: str) -> Any:
        return load_blazeface(range_name, models_dir=models_dir, max_faces=MAX_DETECTIONS,
                              min_score=min_score).to(device, dtype)

    ranges = ("short", "full") if detector_model == "auto" else (detector_model,)
    return [compiled_once(
        ("detector", r, str(models_dir), MAX_DETECTIONS, min_score, str(device), str(dtype)),
        functools.partial(make, r), compile_dir, f"face detector ({r} range)",
        part="face detector", rows_args=(2,) if dynamic_batches else ()) for r in ranges]


def load_mesh(*, models_dir: Any, device: torch.device, dtype: torch.dtype,
              compile_dir: Path | None = None, dynamic_batches: bool = False) -> Any:
    """The face mesh on ``device`` in ``dtype``; compiled as :func:`load_detectors`', with
    ``dynamic_batches`` once for one region and once for any count from two up
    (:mod:`livecam.gpupipe.networks.dynamic_rows`: its region index and regions, arguments 1
    and 2 of :func:`run_mesh`'s call)."""
    from livecam.gpupipe.networks.models import load_face_mesh

    return compiled_once(("mesh", str(models_dir), str(device), str(dtype)),
                         lambda: load_face_mesh(models_dir=models_dir).to(device, dtype),
                         compile_dir, "face mesh", part="face mesh",
                         rows_args=(1, 2) if dynamic_batches else ())


def load_tile_detector(*, models_dir: Any, device: torch.device, dtype: torch.dtype,
                       max_faces: int, compile_dir: Path | None = None) -> Any:
    """The full-range BlazeFace of the tile search (the model's own score threshold,
    ``max_faces`` slots a tile); compiled as :func:`load_detectors`'."""
    from livecam.gpupipe.networks.models import load_blazeface

    return compiled_once(
        ("tile detector", str(models_dir), max_faces, str(device), str(dtype)),
        lambda: load_blazeface("full", models_dir=models_dir,
                               max_faces=max_faces).to(device, dtype),
        compile_dir, "tile search's face detector", part="tile detector")


def mesh_buckets(max_rois: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to and including ``max_rois``: the region counts the mesh runs at."""
    out = [1]
    while out[-1] < max_rois:
        out.append(min(out[-1] * 2, max_rois))
    return tuple(out)


def on_stream(stream: Any, cuda: bool) -> Any:
    """``torch.cuda.stream(stream)`` on CUDA, nothing on a CPU."""
    return torch.cuda.stream(stream) if cuda else contextlib.nullcontext()


def wait_done(event: Any) -> None:
    """Block until the CUDA ``event`` (or stream) has completed. ``query`` first: it keeps the
    GIL, where ``synchronize`` gives it up even for work long done, and on the follower's
    thread each such hand-over waits behind the other threads' Python."""
    if not event.query():
        event.synchronize()


def run_detectors(detectors: Sequence[Any], frames: torch.Tensor,
                  outs: Sequence[torch.Tensor], frame_index: torch.Tensor | None = None) -> None:
    """Every detector on ``frames`` (those ``frame_index`` names; None: all), its four
    outputs copied into ``outs`` (4 per detector, in order): a graph's fixed outputs."""
    for k, detector in enumerate(detectors):
        found = detector(frames, None, frame_index)  # positional: rows_args counts them
        for dst, src in zip(outs[4 * k:4 * k + 4], found, strict=True):
            dst.copy_(src)


def run_mesh(mesh: Any, frames: torch.Tensor, index: torch.Tensor, rows: torch.Tensor,
             out_lm: torch.Tensor, out_presence: torch.Tensor) -> None:
    """The mesh on the regions ``rows`` (N, 4+) (centre x, y, size, rotation) of the frames
    ``index`` (N,) names, copied into the graph's fixed outputs."""
    result = mesh(frames, index, FaceRois(rows[:, 0:2], rows[:, 2], rows[:, 3]))
    out_lm.copy_(result.landmarks_px)
    out_presence.copy_(result.presence)


class CapturedCall:
    """``fn`` captured once in a CUDA graph on ``stream`` (after ``warmup_runs`` eager runs)
    and replayed by each call; on a CPU, or without graphs, ``fn`` itself."""

    def __init__(self, fn: Callable[[], None], *, device: torch.device, stream: Any,
                 use_graph: bool, warmup_runs: int = 2) -> None:
        self._fn = fn
        self._graph: Any = None
        if not use_graph:
            return
        with torch.cuda.stream(stream):
            for _ in range(warmup_runs):
                fn()
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other streams of the process keep running their GPU work meanwhile
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            fn()
        torch.cuda.synchronize(device)
        self._graph = graph

    def __call__(self) -> None:
        if self._graph is not None:
            self._graph.replay()
        else:
            self._fn()


class FrameStack:
    """One frame size: every stream's frame (or ``per_stream`` pictures of each stream) in one
    (S * per_stream, H, W, 3) tensor, the graphs, and the detector graphs' fixed inputs (the
    frames' indices, up to ``per_call`` a call) and host outputs."""

    def __init__(self, n_streams: int, height_px: int, width_px: int,
                 device: torch.device, *, per_call: int, per_stream: int = 1) -> None:
        cuda = device.type == "cuda"
        self.per_stream = per_stream
        self.frames = torch.zeros((n_streams * per_stream, height_px, width_px, 3),
                                  dtype=torch.uint8, device=device)
        self.per_call = per_call
        self.index_host = torch.zeros((per_call,), dtype=torch.int64, pin_memory=cuda)
        self.index_dev = torch.zeros((per_call,), dtype=torch.int64, device=device)
        self.det_host: tuple[torch.Tensor, ...] = ()  # the largest bucket's, set at capture
        # a graph per bucket (its outputs live in its function's defaults)
        self.detect: dict[int, CapturedCall] = {}
        self.mesh: dict[int, CapturedCall] = {}


def mesh_results(lm: np.ndarray, presence: np.ndarray, n: int) -> list[MeshResult | None]:
    """The first ``n`` rows of the mesh's host outputs (landmarks (N, 468, 3) in pixels and
    presence (N,)) as results: None where the presence is under MediaPipe's floor. Each
    result's arrays are rows of two copies made for all ``n`` (C-contiguous, as a copy per
    face would be): on the thread running every stream's batch, each copy lets the GIL go
    (:mod:`livecam.analysis.keepgil`), so two a batch, not two a face."""
    xy, z = lm[:n, :, :2].copy(), lm[:n, :, 2].copy()
    return [MeshResult(xy[i], z[i]) if presence[i] >= MIN_PRESENCE else None
            for i in range(n)]


def merged_detections(found: list[Detection]) -> Faces:
    """Detections best first, overlapping ones from the two models (``auto``) merged."""
    from livecam.analysis.detect import merge_detections

    return merge_detections(found, MAX_DETECTIONS)


def batch_detections(outputs_host: Sequence[torch.Tensor | np.ndarray], frames: int
                     ) -> list[list[Detection]]:
    """The valid detections of each of the first ``frames`` frames of the detectors' host
    outputs (four a detector: boxes, keypoints, scores, valid), each frame's in the order of
    the detectors and then of their slots. The valid rows of all frames are taken in one
    indexed copy per output (float32, each detection's arrays rows of it), not a copy per
    detection: each copy lets the GIL go on the thread running every stream's batch
    (:mod:`livecam.analysis.keepgil`)."""
    found: list[list[Detection]] = [[] for _ in range(frames)]
    for k in range(0, len(outputs_host), 4):
        boxes, points, scores, valid = ((t if isinstance(t, np.ndarray) else t.numpy())[:frames]
                                        for t in outputs_host[k:k + 4])
        frame_of, slot = np.nonzero(valid)
        if not len(slot):
            continue
        boxes_f = boxes[frame_of, slot].astype(np.float32, copy=False)
        points_f = points[frame_of, slot].astype(np.float32, copy=False)
        for row, (j, score) in enumerate(zip(frame_of.tolist(), scores[frame_of, slot].tolist(),
                                             strict=True)):
            found[j].append((boxes_f[row], score, points_f[row]))
    return found

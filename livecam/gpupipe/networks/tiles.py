"""The tile search for small faces on the GPU: every tile of the frame in one batched call.

The CPU tile search (:class:`livecam.analysis.detect.BlazeFaceDetector`) runs the full-range
BlazeFace on two tiles every ``detect_every_n_frames`` frames, so a 1080p frame's 28 tiles are
all searched only every 70 frames, and each run costs the CPU several ms (on the H200 host,
offline, 36 % of the follower's thread; live, a worker thread per stream). Here the same tiles
(:func:`livecam.analysis.detect.tiles`), letterboxed as the CPU letterboxes a tile, run as one
batch of the torch BlazeFace on the frame :class:`StreamFaceNetworks` already uploaded, captured in
a CUDA graph per frame size: every tile at every search, at about the cost of one tile, from
the follower's own thread (``on_caller_thread``). The follower launches a search one frame
before it is due and takes the result on the due frame (``deferred``: a small face is found by
the same frame as before, its detection one frame old, as the CPU worker's are): waiting for
it on its own frame costs one stream 22 % of its offline frames on the H200 (284 fps, 364
with the search all but off), the GPU being busy with earlier frames' swaps. Detections
cut by a tile's inner edge are left out and the rest merged over the tiles exactly as on the
CPU. Tiles keep the model's own score threshold (0.6), as the CPU tile search does: at the
tracker's floor (0.3) that the whole-frame pass uses, tiles of a 1080p frame with one face
held five false faces, each then covered on every frame (on the H200 the collector thread
spent 62 % of its time in the cover).

With ``whole_frame`` (``advanced.analysis.detect_each_frame`` off) the search also reports the
networks' whole-frame detections, as the CPU search runs its whole-frame pass.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from livecam.analysis.detect import (
    SearchResult,
    cut_by_inner_edge,
    merge_detections,
    tile_crop,
    tiles,
)
from livecam.core.types import ImageBGR
from livecam.engines.cuda_streams import new_stream, release_stream
from livecam.gpupipe.networks.calls import MAX_DETECTIONS, CapturedCall, wait_done

if TYPE_CHECKING:
    from livecam.gpupipe.networks.client import StreamFaceNetworks

#: Detection slots per tile: the full-range model sees faces down to ~1/8 of a tile, so a tile
#: holds a handful of them; more would be merged away with the neighbouring tiles' anyway.
SLOTS_PER_TILE = 16


class _Batch:
    """One frame size's tiles and their batch, shared by every stream's search: the frame
    buffer each search copies its frame into, the call (captured on CUDA), its outputs on the
    device (boxes, keypoints, scores, valid)."""

    def __init__(self, crops_xyxy: list[tuple[int, int, int, int]]) -> None:
        self.crops_xyxy = crops_xyxy
        #: the tiles as every search's result names them (T, 4) float32, made once (read-only:
        #: each result shares it)
        self.searched_xyxy = np.array(crops_xyxy, np.float32).reshape(-1, 4)
        self.searched_xyxy.flags.writeable = False
        self.frame = torch.zeros(0)
        self.call: CapturedCall | None = None
        self.out: tuple[torch.Tensor, ...] = ()


def _squares(crops_xyxy: list[tuple[int, int, int, int]]) -> np.ndarray:
    """(T, 3) float32 squares (x0, y0, side px) the detector sees for each tile: the tile
    letterboxed, centred on it, as the CPU letterboxes a tile cut by the frame's edge."""
    rows = []
    for x0, y0, x1, y1 in crops_xyxy:
        side = max(x1 - x0, y1 - y0)
        rows.append(((x0 + x1 - side) / 2, (y0 + y1 - side) / 2, side))
    return np.array(rows, np.float32).reshape(-1, 3)


class TileBatches:
    """Every stream's tile search, one batch per frame size for them all
    (:meth:`SharedFaceNetworks.tile_batches`): one CUDA graph and one frame buffer, where each
    stream's own graph and its memory pool took 528 MB at 1080p on an H100, the most of what a
    stream added to the GPU's memory. The searches run in turn on one CUDA stream, under one
    lock: each copies its frame into the buffer, replays the batch and copies the outputs to
    host buffers of its own, so a search's outputs are its own whatever ran after it."""

    def __init__(self, detector: Any, *, device: torch.device, use_graphs: bool) -> None:
        self._detector = detector
        self.device = device
        self.cuda = device.type == "cuda"
        self._use_graphs = use_graphs and self.cuda
        self._lock = threading.Lock()
        # never the default stream: another stream of the process may be capturing a CUDA
        # graph meanwhile, and work on the legacy default stream would invalidate that capture
        # (as 8 streams starting together do)
        self._stream = new_stream(device) if self.cuda else None
        self._batches: dict[tuple[int, int, int], _Batch | None] = {}  # None: no tiles

    def close(self) -> None:
        with self._lock:
            self._batches.clear()
            release_stream(self._stream)
            self._stream = None

    def _on_stream(self) -> Any:
        return torch.cuda.stream(self._stream) if self._stream is not None \
            else contextlib.nullcontext()

    def batch(self, height_px: int, width_px: int, tile_size_px: int) -> _Batch | None:
        """This frame size's batch (made, and captured on CUDA, on first use: about a second);
        None: the frame has no tiles."""
        key = (height_px, width_px, tile_size_px)
        with self._lock:
            if key in self._batches:
                return self._batches[key]
            crops = [tile_crop(t, width_px, height_px)
                     for t in tiles(width_px, height_px, tile_size_px)]
            made = _Batch(crops) if crops else None
            if made is not None:
                self._make(made, height_px, width_px)
            self._batches[key] = made
            return made

    def _make(self, made: _Batch, height_px: int, width_px: int) -> None:
        with torch.inference_mode(), self._on_stream():
            made.frame = torch.zeros((1, height_px, width_px, 3), dtype=torch.uint8,
                                     device=self.device)
            squares = torch.from_numpy(_squares(made.crops_xyxy)).to(self.device)
            made.out = tuple(t.clone() for t in self._detector(made.frame, squares))

            def run() -> None:
                for dst, src in zip(made.out, self._detector(made.frame, squares), strict=True):
                    dst.copy_(src)

            made.call = CapturedCall(run, device=self.device, stream=self._stream,
                                     use_graph=self._use_graphs)

    def run(self, batch: _Batch, frame: torch.Tensor, upload: Any,
            host: tuple[torch.Tensor, ...], read: Any, done: Any) -> None:
        """Queue the search of ``frame`` (after the CUDA stream ``upload``) and the copy of its
        outputs into ``host``; on CUDA ``read`` is recorded once the frame is copied and
        ``done`` once ``host`` is filled (on a CPU it is done on return)."""
        assert batch.call is not None
        with self._lock, torch.inference_mode(), self._on_stream():
            if self._stream is not None:
                self._stream.wait_stream(upload)
            batch.frame.copy_(frame)
            if self._stream is not None:
                read.record(self._stream)
            batch.call()
            # one call: each torch call gives the GIL up and waits to get it back
            torch._foreach_copy_(list(host), list(batch.out), non_blocking=True)
            if self._stream is not None:
                done.record(self._stream)


class GpuTileSearch:
    """A :class:`~livecam.analysis.networks.TileSearch` on :class:`StreamFaceNetworks`' frames
    (see the module docstring), through the streams' :class:`TileBatches`. ``search``
    searches every tile, whatever ``all_tiles`` says; ``launch`` and ``take`` split it so the
    follower need not wait (``deferred``). One caller (the follower's thread, which also
    drives ``networks``). Construct cheaply; ``open`` loads the model (the networks' own
    ``open`` is idempotent)."""

    on_caller_thread = True

    def __init__(self, networks: StreamFaceNetworks, *, tile_size_px: int,
                 whole_frame: bool = False) -> None:
        self.networks = networks
        self.tile_size_px = tile_size_px
        self.whole_frame = whole_frame
        self._batches: TileBatches | None = None
        #: this search's host copies of each frame size's outputs (pinned on CUDA)
        self._hosts: dict[tuple[int, int], tuple[torch.Tensor, ...]] = {}
        #: the follower may launch a due search and take its result on the next frame (its
        #: own whole-frame pass runs every frame); with ``whole_frame`` the search stands in
        #: for that pass and runs on the frame it searches
        self.deferred = not whole_frame
        self._pending: tuple[_Batch | None, int, int, list[Any]] | None = None
        self._read: Any = None  # CUDA event: the launched search has read the frame
        self._done: Any = None  # CUDA event: its results are in host memory

    def open(self) -> None:
        if self._batches is not None:
            return
        nets = self.networks
        nets.open()
        self._batches = nets.tile_batches(SLOTS_PER_TILE)
        if nets.cuda:
            self._read, self._done = torch.cuda.Event(), torch.cuda.Event()

    def close(self) -> None:
        self._batches = None
        self._pending = None
        self._hosts.clear()

    def prepare(self, width_px: int, height_px: int) -> None:
        """Capture this frame size's batch now (CUDA: a second or so, once for every
        stream), before frames flow."""
        self._batch(height_px, width_px)

    def _batch(self, h: int, w: int) -> _Batch | None:
        if self._batches is None:
            raise RuntimeError("GpuTileSearch used before open()")
        batch = self._batches.batch(h, w, self.tile_size_px)
        if batch is not None and (h, w) not in self._hosts:
            pinned = self.networks.cuda
            self._hosts[(h, w)] = tuple(torch.zeros(t.shape, dtype=t.dtype, pin_memory=pinned)
                                        for t in batch.out)
        return batch

    def search(self, image_bgr: ImageBGR, *, all_tiles: bool = False) -> SearchResult:
        """Every tile of ``image_bgr`` searched now (the caller waits for the GPU)."""
        self.launch(image_bgr)
        result = self.take()
        assert result is not None
        return result

    def launch(self, image_bgr: ImageBGR) -> None:
        """Start the search of ``image_bgr`` on the GPU and return at once; :meth:`take` hands
        the result over (a later frame's caller: ``deferred``). The networks' next upload
        waits on the GPU until the tiles are read. A search launched and not taken is
        dropped by the next launch."""
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        found: list[tuple[np.ndarray, float, np.ndarray]] = []
        if self.whole_frame:
            whole = self.networks.detect(image_bgr)
            found += [(whole.boxes_xyxy[i], float(whole.scores[i]), whole.keypoints_xy[i])
                      for i in range(len(whole))]
        batch = self._batch(h, w)
        self._pending = (batch, h, w, found)
        if batch is None:
            return
        assert self._batches is not None
        frame, upload = self.networks.frame_on_device(image_bgr)
        self._batches.run(batch, frame, upload, self._hosts[(h, w)], self._read, self._done)
        if self._read is not None:
            self.networks.hold_frame_until(self._read)

    def take(self) -> SearchResult | None:
        """The launched search's result (waiting for the GPU if it is not done), or None when
        none was launched since the last take."""
        if self._pending is None:
            return None
        batch, h, w, found = self._pending
        self._pending = None
        if batch is None:
            return SearchResult(merge_detections(found, MAX_DETECTIONS),
                                np.zeros((0, 4), np.float32))
        if self._done is not None:
            wait_done(self._done)  # launched a frame ago: mostly done
        boxes, points, scores, valid = (t.float().numpy() if t.dtype == torch.float16
                                        else t.numpy() for t in self._hosts[(h, w)])
        crops = batch.crops_xyxy
        # the valid slots of every tile at once, tile by tile and slot by slot (one call, not
        # one a tile: a 1080p frame has 28 tiles, most of them empty)
        for t, j in zip(*(a.tolist() for a in np.nonzero(valid[:len(crops)])), strict=True):
            if not cut_by_inner_edge(boxes[t, j], crops[t], w, h):
                found.append((boxes[t, j].astype(np.float32), float(scores[t, j]),
                              points[t, j].astype(np.float32)))
        return SearchResult(merge_detections(found, MAX_DETECTIONS), batch.searched_xyxy)

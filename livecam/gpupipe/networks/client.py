"""One stream's share of :class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`.

:class:`StreamFaceNetworks` is a :class:`livecam.analysis.networks.FaceNetworks` (``detect``,
``landmarks``, as the CPU's MediaPipe networks) with what the GPU's tile search and swap use
besides (``frame_on_device``, ``device_frame``, ``hold_frame_until``). The frame goes up once
into the stream's own place of the stacked frames (on the stream's own CUDA stream, from the
pinned memory the capture thread put it in, :mod:`livecam.gpupipe.networks.host`, or else its own
pinned staging: one host copy); the networks run in the shared batches. With
``refine_landmarks`` the stream's 478-point mesh runs on the host (MediaPipe's graph, the CPU
path's landmarker): it has no torch port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from livecam.analysis.mesh import MeshResult
from livecam.analysis.roi import Roi
from livecam.analysis.second_look import StripPlace
from livecam.core.types import Faces, ImageBGR
from livecam.engines.cuda_streams import new_stream, release_stream
from livecam.gpupipe.networks.batching import Batcher, Request
from livecam.gpupipe.networks.calls import Detection, FrameStack, merged_detections, wait_done
from livecam.gpupipe.networks.facemesh import NUM_LANDMARKS
from livecam.gpupipe.networks.host import pinned_copy, pinned_tensor


def index_out(source: torch.Tensor, indices: list[torch.Tensor], *, out: torch.Tensor) -> None:
    """``out[...] = source[indices]`` (advanced indexing, broadcast indices) in one kernel,
    written into ``out`` (a view of a stack) rather than into a new tensor copied there."""
    torch.ops.aten.index.Tensor_out(source, indices, out=out)


class SharedFaceNetworks(Protocol):
    """What a stream's share uses of :class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`
    (named here so this module does not import the one that makes its objects)."""

    device: torch.device
    cuda: bool
    precision: str
    use_graphs: bool
    models_dir: str | Path | None
    max_rois: int
    refine_landmarks: bool
    batcher: Batcher

    def tile_detector(self, max_faces: int) -> Any: ...

    def tile_batches(self, max_faces: int) -> Any: ...

    def acquire(self) -> None: ...

    def release(self) -> None: ...

    def on_stream(self, stream: Any) -> Any: ...

    def stack(self, height_px: int, width_px: int) -> FrameStack: ...

    def picture_stack(self, height_px: int, width_px: int,
                      per_stream: int = 1) -> FrameStack: ...


class _Own:
    """One stream's things for one frame size: its place in the stacked frames (as (H, W, 3)
    and (1, H, W, 3) views, made once), pinned staging and the kept frames."""

    def __init__(self, stack: FrameStack, slot: int, device: torch.device, cuda: bool,
                 keep_frames: int) -> None:
        self.place = stack.frames[slot]
        self.place_batch = stack.frames[slot:slot + 1]
        height_px, width_px = int(self.place.shape[0]), int(self.place.shape[1])
        self.staging = torch.zeros((height_px, width_px, 3), dtype=torch.uint8,
                                   pin_memory=cuda)
        self.staging_np = self.staging.numpy()
        self.kept = [torch.zeros((height_px, width_px, 3), dtype=torch.uint8, device=device)
                     for _ in range(keep_frames)]
        self.kept_ready = [torch.cuda.Event() if cuda else None for _ in range(keep_frames)]
        self.next_kept = 0


class StreamFaceNetworks:
    """One stream's :class:`SharedFaceNetworks` (made by its ``slot_for``; see the module
    docstring). One thread (the stream's pipeline thread) calls it."""

    def __init__(self, shared: SharedFaceNetworks, slot: int, *, detect_ahead: bool = True,
                 keep_frames: int = 0, pinned_capture: bool = False) -> None:
        self.shared = shared
        self.slot = slot
        self.detect_ahead = detect_ahead
        self.keep_frames = max(0, keep_frames)
        self.device = shared.device
        self.cuda = shared.cuda
        self.precision = shared.precision
        self.use_graphs = shared.use_graphs
        self.models_dir = shared.models_dir
        self.max_rois = shared.max_rois
        self.refine_landmarks = shared.refine_landmarks
        self._host_mesh: Any = None  # refine_landmarks: MediaPipe's graph on the host
        #: the capture thread's copy of each frame into pinned memory (the analysis stage's
        #: ``host_frames``), or None: frames are copied into the staging here
        self.host_frames = pinned_copy if pinned_capture and self.cuda else None
        self._opened = False
        self._stream: Any = None
        self._uploaded: Any = None  # the last frame is uploaded (and kept) after this event
        self._uploaded_alone: Any = None  # that event when no frame is kept
        self._holds: list[Any] = []
        self._own: dict[tuple[int, int], _Own] = {}
        self._image: ImageBGR | None = None
        self._frame_dev: torch.Tensor | None = None
        self._found: list[Detection] | None = None
        #: each frame size's latest kept upload: (its image, the kept copy, its event). Per
        #: size, so that the edge search's strips (pictures of their own size, uploaded after
        #: the frame) do not take the frame's place: the swap then copied every frame into a
        #: pinned buffer on the host and uploaded it again
        self._kept_for: dict[tuple[int, int], tuple[ImageBGR, torch.Tensor, Any]] = {}
        #: edge strips asked to go with the frame's next call (:meth:`ask_strips`), and once
        #: served, their requests by place index: (the frame, the places, the requests)
        self._strips_asked: tuple[ImageBGR, Sequence[StripPlace]] | None = None
        self._strips_served: tuple[ImageBGR, Sequence[StripPlace],
                                   list[tuple[int, Request]]] | None = None
        #: the edge strips' frame rows and columns on the device, per frame size and strips
        self._strip_index: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self._strip_built: Any = None  # CUDA event: the latest strip picture is built
        self._pictures: dict[tuple[int, int], FrameStack] = {}  # the pictures' stacks, by size

    def tile_detector(self, max_faces: int) -> Any:
        """The streams' one tile-search detector (:meth:`SharedFaceNetworks.tile_detector`)."""
        return self.shared.tile_detector(max_faces)

    def tile_batches(self, max_faces: int) -> Any:
        """The streams' one tile search batch per frame size
        (:meth:`SharedFaceNetworks.tile_batches`: a
        :class:`~livecam.gpupipe.networks.tiles.TileBatches`, not named here: tiles.py names this
        module's class)."""
        return self.shared.tile_batches(max_faces)

    @property
    def num_landmarks(self) -> int:
        """Points per face :meth:`landmarks` returns (478 with ``refine_landmarks``)."""
        return 478 if self.refine_landmarks else NUM_LANDMARKS

    def open(self) -> None:
        if self._opened:
            return
        if self.refine_landmarks and self._host_mesh is None:
            import logging

            from livecam.analysis.mesh import FaceMeshLandmarker

            logging.getLogger(__name__).info(
                "advanced.analysis.refine_landmarks: the 478-point mesh has no GPU port; it runs "
                "on the host (MediaPipe), the detector on %s", self.device)
            self._host_mesh = FaceMeshLandmarker(refine_landmarks=True)
            self._host_mesh.open()
        self.shared.acquire()
        if self.cuda:
            self._stream = new_stream(self.device, urgent=True)
            self._uploaded_alone = torch.cuda.Event()
            self._uploaded = self._uploaded_alone
            self._strip_built = torch.cuda.Event()
        self._opened = True

    def close(self) -> None:
        if not self._opened:
            return
        self._opened = False
        if self._stream is not None:
            self._stream.synchronize()
        release_stream(self._stream)
        self._stream = self._uploaded = self._uploaded_alone = self._strip_built = None
        self._own.clear()
        self._strip_index.clear()
        self._pictures.clear()
        self._image = self._frame_dev = None
        self._kept_for.clear()
        if self._host_mesh is not None:
            self._host_mesh.close()
        self._host_mesh = None
        self.shared.release()

    def prepare(self, width_px: int, height_px: int) -> None:
        """Allocate for this frame size and capture the shared graphs now (CUDA: seconds)."""
        self._size(height_px, width_px)

    def _size(self, height_px: int, width_px: int) -> _Own:
        own = self._own.get((height_px, width_px))
        if own is None:
            stack = self.shared.stack(height_px, width_px)
            own = self._own[(height_px, width_px)] = _Own(stack, self.slot, self.device,
                                                          self.cuda, self.keep_frames)
        return own

    def prepare_pictures(self, counts: Mapping[tuple[int, int], int]) -> None:
        """Make the pictures' stacks now, ``counts``: (H, W) size -> how many pictures of the
        size a frame has (their places, detected in one call), their graphs captured on this
        thread (``prepare``'s, before frames flow), not on the stream's first frames."""
        for (height_px, width_px), count in counts.items():
            self._picture_places(height_px, width_px, count)

    def _picture_places(self, height_px: int, width_px: int, count: int = 1) -> FrameStack:
        """The pictures' stack of the size (this stream's places: ``per_stream`` of them
        from ``slot * per_stream``); ``count`` sets their number on first use."""
        stack = self._pictures.get((height_px, width_px))
        if stack is None:
            stack = self.shared.picture_stack(height_px, width_px, count)
            self._pictures[(height_px, width_px)] = stack
        return stack

    def new_frame(self, image_bgr: ImageBGR) -> None:
        """A new frame: uploaded once into this stream's place of the stacked frames."""
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        own = self._size(h, w)
        # a frame the capture thread put in pinned memory goes up from there
        source = pinned_tensor(image_bgr) if self.host_frames is not None else None
        if source is None:
            if self.cuda:
                wait_done(self._uploaded)  # the staging is free (the last copy is done)
            np.copyto(own.staging_np, image_bgr)
            source = own.staging
        place = own.place
        with torch.inference_mode(), self.shared.on_stream(self._stream):
            for event in self._holds:  # a deferred reader of the last frame is done
                self._stream.wait_event(event)
            self._holds.clear()
            place.copy_(source, non_blocking=True)
            uploaded = self._uploaded_alone
            if own.kept:
                k = own.next_kept
                own.next_kept = (k + 1) % len(own.kept)
                own.kept[k].copy_(place)
                uploaded = own.kept_ready[k]
                self._kept_for[(h, w)] = (image_bgr, own.kept[k], uploaded)
            if self.cuda:  # one event for the upload and the kept copy: one torch call less
                uploaded.record(self._stream)
                self._uploaded = uploaded
        self._image, self._found = image_bgr, None
        self._frame_dev = own.place_batch

    def _frame(self, image_bgr: ImageBGR) -> None:
        if self._image is not image_bgr:
            self.new_frame(image_bgr)

    def hold_frame_until(self, event: Any) -> None:
        """The next upload waits (on the GPU) for ``event``: a deferred tile search reads it."""
        self._holds.append(event)

    def device_frame(self, image_bgr: ImageBGR) -> tuple[torch.Tensor, Any] | None:
        """``image_bgr`` as uploaded for the latest frame: the kept device (H, W, 3) uint8
        copy and the CUDA event after which it holds the frame (None on a CPU), or None when
        that image is not the latest upload of its size (or frames are not kept). Valid for
        ``keep_frames`` frames of its size (pictures of other sizes, such as the edge
        search's strips, leave it)."""
        kept = self._kept_for.get((image_bgr.shape[0], image_bgr.shape[1]))
        if kept is None or kept[0] is not image_bgr:
            return None
        return kept[1], kept[2]

    def frame_on_device(self, image_bgr: ImageBGR) -> tuple[torch.Tensor, Any]:
        """This stream's place, (1, H, W, 3) uint8 (the same memory every frame of the size),
        and the CUDA stream its upload runs on (None on a CPU)."""
        self._frame(image_bgr)
        assert self._frame_dev is not None
        return self._frame_dev, self._stream

    def ask_strips(self, image_bgr: ImageBGR, places: Sequence[StripPlace]) -> None:
        """The edge-strip pictures ``places`` of ``image_bgr`` (as :meth:`detect_strips`
        takes them) go with the frame's next call (its detection or its mesh): one round
        trip through the streams' batcher for both, where with 16 streams each round trip is
        what a frame's analysis waits on. :meth:`detect_strips` with the same places then
        takes their detections. Nothing is asked where a picture has the frame's own size."""
        size = (int(image_bgr.shape[0]), int(image_bgr.shape[1]))
        if places and not any((len(p.rows), len(p.cols)) == size for p in places):
            self._strips_asked = (image_bgr, places)

    def _asked_pictures(self, image_bgr: ImageBGR) -> list[tuple[int, Request]]:
        """The pictures asked for ``image_bgr`` (:meth:`ask_strips`), built for its call;
        none when none were asked for this frame."""
        asked, self._strips_asked = self._strips_asked, None
        if asked is None or asked[0] is not image_bgr:
            return []
        size = (int(image_bgr.shape[0]), int(image_bgr.shape[1]))
        built, _ = self._build_pictures(self._own[size].place, size, asked[1],
                                        list(range(len(asked[1]))))
        self._strips_served = (image_bgr, asked[1], built)
        return built

    def _served(self, image_bgr: ImageBGR,
                places: Sequence[StripPlace]) -> list[tuple[int, Request]]:
        """The requests of ``places`` served with the frame's call, if they were asked."""
        served, self._strips_served = self._strips_served, None
        if served is None or served[0] is not image_bgr or len(served[1]) != len(places) \
                or any(a is not b for a, b in zip(served[1], places, strict=True)):
            return []
        return served[2]

    def detect_strips(self, image_bgr: ImageBGR,
                      places: Sequence[StripPlace]) -> list[Faces] | None:
        """Faces in each edge-strip picture ``places`` describes
        (:func:`livecam.analysis.edges.strip_places`, or an edge hit's second look,
        :func:`~livecam.analysis.edges.second_look_places`, whose indices are not kept: its
        place changes from hit to hit), in picture px: each picture built on
        the device from this frame's upload (two index selections on the stream's CUDA
        stream, into this stream's place of the pictures' stacked frames) and detected as
        :meth:`detect` would detect it uploaded: the same pixels. The frame stays the latest
        upload (its detections, its kept copy). None where a picture has the frame's own size
        (a square frame): the caller uploads the pictures then."""
        size = (int(image_bgr.shape[0]), int(image_bgr.shape[1]))
        if any((len(p.rows), len(p.cols)) == size for p in places):
            return None
        self._frame(image_bgr)
        source = self._own[size].place
        found: list[Faces | None] = [None] * len(places)
        for k, request in self._served(image_bgr, places):  # with the frame's call
            assert request.found is not None
            found[k] = merged_detections(request.found)
        left = [k for k, f in enumerate(found) if f is None]
        while left:  # one call for all (more rounds only past a stack's places per stream)
            requests, left = self._build_pictures(source, size, places, left)
            self.shared.batcher.call_all([r for _, r in requests])
            for k, request in requests:
                assert request.found is not None
                found[k] = merged_detections(request.found)
        return [f for f in found if f is not None]

    def _build_pictures(self, source: torch.Tensor, size: tuple[int, int],
                        places: Sequence[StripPlace], which: list[int]
                        ) -> tuple[list[tuple[int, Request]], list[int]]:
        """The pictures ``which`` (indices into ``places``) built into this stream's places
        of their stacks, as far as those places go: (place index, its request) each, and
        the indices left for another round. The pictures of one size are built by one
        gather (their rows and columns indices broadcast, into their consecutive places):
        each torch call on the stream's thread gives the GIL up and queues to get it back
        among every stream's threads."""
        by_shape: dict[tuple[int, int], list[int]] = {}
        for k in which:
            by_shape.setdefault((len(places[k].rows), len(places[k].cols)), []).append(k)
        built: list[tuple[int, Request]] = []
        left: list[int] = []
        with torch.inference_mode(), self.shared.on_stream(self._stream):
            for shape, ks in by_shape.items():
                stack = self._picture_places(*shape, count=len(ks))
                first = self.slot * stack.per_stream
                left += ks[stack.per_stream:]
                ks = ks[:stack.per_stream]
                rows, cols = self._picture_index(size, shape, places, ks,
                                                 keep=len(ks) in (1, stack.per_stream))
                index_out(source, [rows, cols], out=stack.frames[first:first + len(ks)])
                built += [(k, Request(first + j, shape, detect=True, rois=(), uploaded=None,
                                      picture=True)) for j, k in enumerate(ks)]
            if self.cuda:  # one event for every picture built
                self._strip_built.record(self._stream)
                for _, request in built:
                    request.uploaded = self._strip_built
        return built, left

    def _picture_index(self, size: tuple[int, int], shape: tuple[int, int],
                       places: Sequence[StripPlace], ks: list[int], *, keep: bool
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The frame rows (P, ph, 1) and columns (P, 1, pw) of the pictures ``ks`` of
        ``places`` (all of ``shape``) on the device: kept for pictures made every frame
        (the strips) where ``keep`` (a frame's strips of the shape, all or one: the strips
        due in a frame vary, and every subset kept would pile up 2^8 of them), else uploaded
        in one copy (a second look's, made once: one pair would pile up for each place a hit
        was found)."""
        kept = keep and all(places[k].kept for k in ks)
        key = (size, shape, tuple((k, *places[k].offset_xy.tolist()) for k in ks))
        index = self._strip_index.get(key) if kept else None
        if index is None:
            both = np.concatenate([np.stack([places[k].rows for k in ks]),
                                   np.stack([places[k].cols for k in ks])], axis=1)
            on_device = torch.from_numpy(both).to(self.device)
            height_px = shape[0]
            index = (on_device[:, :height_px, None], on_device[:, None, height_px:])
            if kept:
                self._strip_index[key] = index
        return index

    def _call(self, image_bgr: ImageBGR, *, detect: bool, rois: Sequence[Roi]) -> Request:
        request = Request(self.slot, (int(image_bgr.shape[0]), int(image_bgr.shape[1])),
                          detect=detect, rois=rois, uploaded=self._uploaded)
        pictures = self._asked_pictures(image_bgr)
        self.shared.batcher.call_all([request, *(r for _, r in pictures)])
        if request.found is not None:
            self._found = request.found
        return request

    def detect(self, image_bgr: ImageBGR) -> Faces:
        """Faces in the whole frame, best first (asked with the frame's first mesh call when
        ``detect_ahead``)."""
        self._frame(image_bgr)
        if self._found is None:
            self._call(image_bgr, detect=True, rois=())
        assert self._found is not None
        return merged_detections(self._found)

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        """The mesh in each region (None where its presence is under MediaPipe's floor)."""
        if self._host_mesh is not None:
            return list(self._host_mesh.landmarks(image_bgr, rois))
        if not rois:
            return []
        self._frame(image_bgr)
        ahead = self.detect_ahead and self._found is None
        return self._call(image_bgr, detect=ahead, rois=rois).meshes


if TYPE_CHECKING:  # the seam, checked by mypy: the GPU's networks are the CPU's protocol
    from livecam.analysis.networks import FaceNetworks

    def _is_face_networks(networks: StreamFaceNetworks) -> FaceNetworks:
        return networks

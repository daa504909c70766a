"""The networks a face follower runs, behind one small interface (CPU today, the GPU later).

:class:`~livecam.analysis.follower.FaceFollower` decides *when* to detect, where to run the
mesh, how to track, smooth and select; a :class:`FaceNetworks` only runs the two networks:

- ``detect(image)``: the whole-frame face detector, on every frame (so a face is found on the
  frame it appears in).
- ``landmarks(image, rois)``: the face mesh on rotated regions of interest.

and a :class:`TileSearch` runs the detector on tiles of the frame, for faces too small for the
whole-frame pass (on the CPU in turn, a few tiles per call, all of them on the first frame; on
the GPU every tile in one call). The CPU tile search may run on a worker thread *at the same
time* as the other two (live mode), so an implementation must not share a single-caller
network between them.

:class:`CpuFaceNetworks` is MediaPipe's BlazeFace and face mesh on LiteRT (or MediaPipe's
graphs); the GPU pipeline's torch ports (``livecam.gpupipe.networks``) implement the same two
protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from livecam.analysis.detect import BlazeFaceDetector, SearchResult
from livecam.analysis.mesh import FaceMeshLandmarker, MeshResult
from livecam.analysis.roi import Roi
from livecam.core.types import Faces, ImageBGR

if TYPE_CHECKING:  # not imported for a type alone: see livecam.analysis.detect
    from livecam.analysis.second_look import StripPlace

#: Most detections kept per frame: every face the detector sees is either followed or covered,
#: so this is far above ``analysis.max_faces``.
MAX_DETECTIONS = 64


class FaceNetworks(Protocol):
    """Whole-frame detection and face mesh. ``open`` loads the models (idempotent), ``close``
    frees them (idempotent). ``detect`` and ``landmarks`` are called by one thread (the
    pipeline thread), one call at a time."""

    @property
    def num_landmarks(self) -> int:
        """K, the points per face ``landmarks`` returns (468 or 478)."""
        ...

    def open(self) -> None: ...

    def close(self) -> None: ...

    def detect(self, image_bgr: ImageBGR) -> Faces:
        """Faces in the whole frame: ``boxes_xyxy`` (N, 4), ``scores`` (N,), ``keypoints_xy``
        (N, 6, 2) px in BlazeFace order; best first; ``track_ids`` -1. Weak detections (down
        to the tracker's ``low_score_threshold``) included: the follower only takes them as
        signs of a face it lost. New arrays on every call: the follower keeps boxes of them
        across frames."""
        ...

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        """The mesh in each ROI (None where the model says no face is there), in ROI order."""
        ...


class TileSearch(Protocol):
    """The detector on tiles of the frame (small faces). One caller at a time, which may be a
    worker thread running beside :class:`FaceNetworks`' caller.

    ``on_caller_thread``: True when a search costs the caller little (the GPU's one batched
    call over every tile), so live mode runs it on the follower's thread, on the frame it
    searches; False: live mode runs it on a worker thread (a CPU search of a few tiles takes
    several ms) and merges its result a frame or two later."""

    on_caller_thread: bool
    #: True: also a :class:`DeferredTileSearch` (the follower launches a due search and takes
    #: its result on the next frame instead of waiting for it)
    deferred: bool

    def open(self) -> None: ...

    def close(self) -> None: ...

    def search(self, image_bgr: ImageBGR, *, all_tiles: bool = False) -> SearchResult:
        """Faces found in the next few tiles (every tile with ``all_tiles``), as
        :meth:`FaceNetworks.detect` returns them, and the tiles searched; empty when the
        frame needs no tiles."""
        ...


class DeferredTileSearch(TileSearch, Protocol):
    """A search split in two, for a caller that should not wait for it (the GPU's)."""

    def launch(self, image_bgr: ImageBGR) -> None:
        """Start searching every tile of ``image_bgr``; return at once."""
        ...

    def take(self) -> SearchResult | None:
        """The launched search's result (waiting for it if need be), or None when none was
        launched since the last take."""
        ...


class CpuFaceNetworks:
    """BlazeFace (whole frame) and MediaPipe's face mesh on the CPU. Construct cheaply."""

    def __init__(self, *, detector_model: str = "full", min_score: float = 0.5,
                 refine_landmarks: bool = False) -> None:
        self.detector = BlazeFaceDetector(model=detector_model, min_score=min_score,
                                          max_faces=MAX_DETECTIONS, tile_size_px=0, weak=True)
        self.landmarker = FaceMeshLandmarker(refine_landmarks=refine_landmarks)

    @property
    def num_landmarks(self) -> int:
        return self.landmarker.num_landmarks

    @property
    def runner(self) -> str:
        """``direct`` (LiteRT) or ``graph`` (MediaPipe), for logs and ``livecam doctor``."""
        return self.landmarker.runner

    def open(self) -> None:
        self.detector.open()
        self.landmarker.open()

    def close(self) -> None:
        self.detector.close()
        self.landmarker.close()

    def detect(self, image_bgr: ImageBGR) -> Faces:
        return self.detector.detect(image_bgr)

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        return self.landmarker.landmarks(image_bgr, rois)

    def detect_strips(self, image_bgr: ImageBGR,
                      places: Sequence[StripPlace]) -> list[Faces] | None:
        """Faces in each edge-strip picture ``places`` describes, in picture px, sampled
        from the frame without building the pictures
        (:meth:`~livecam.analysis.detect.BlazeFaceDetector.detect_places`); None: the
        caller builds them (:class:`~livecam.analysis.edges.StripSearch`)."""
        return self.detector.detect_places(image_bgr, places)


def cpu_tile_search(*, min_score: float, tile_size_px: int, tiles_per_call: int,
                    whole_frame: bool = False) -> BlazeFaceDetector:
    """A :class:`TileSearch` on the CPU: the full-range BlazeFace on tiles (and the whole frame
    too with ``whole_frame``), with its own interpreter so it can run beside
    :class:`CpuFaceNetworks`."""
    return BlazeFaceDetector(model="full", min_score=min_score, max_faces=MAX_DETECTIONS,
                             tile_size_px=tile_size_px, tiles_per_call=tiles_per_call,
                             whole_frame=whole_frame)

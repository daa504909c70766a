"""The analysis stage: one :class:`~livecam.analysis.follower.FaceFollower` per run.

The stage only moves frames in and faces out; everything about *which* faces, *when* to
detect and *how* to follow them is the follower's (``follower.py``), and the networks are
behind :class:`~livecam.analysis.networks.FaceNetworks` (``networks.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from livecam.analysis.follower import FaceFollower
from livecam.core.stage import StageBase
from livecam.core.types import Faces, ImageBGR, Packet, WithheldFaces


class AnalysisStage(StageBase):
    """Finds and follows faces. ``process`` returns the packet with

    - ``faces``: the faces to swap: ``boxes_xyxy`` (N, 4) around the smoothed landmarks,
      ``scores`` (N,), ``keypoints_xy`` (N, 6, 2) from the mesh (BlazeFace order),
      ``landmarks_xy`` (N, 468|478, 2), ``landmarks_z`` (N, 468|478), ``track_ids`` (N,) >= 1,
      all float32 px / int64;
    - ``withheld``: the faces in the frame that must not be swapped in it (and why).

    Only the pipeline thread may call ``process``. ``last_timings_ms`` holds the latest
    frame's split (detect, search, mesh, track, smooth, select, total).
    """

    name = "analysis"

    def __init__(self, follower: FaceFollower) -> None:
        self.follower = follower
        self._opened = False

    @property
    def last_timings_ms(self) -> dict[str, float]:
        return self.follower.last_timings_ms

    @property
    def last_frame_detected(self) -> bool:
        return self.follower.last_frame_detected

    @property
    def host_frames(self) -> Callable[[ImageBGR], ImageBGR] | None:
        """Where the capture thread puts each frame for the networks (their ``host_frames``:
        page-locked memory on a GPU, :mod:`livecam.gpupipe.networks.host`), or None."""
        return getattr(self.follower.networks, "host_frames", None)

    @property
    def background(self) -> object:
        """The tile search's worker (live mode), or None."""
        return self.follower.background

    def open(self) -> None:
        if not self._opened:
            self.follower.open()
            self._opened = True

    def close(self) -> None:
        self.follower.close()
        self._opened = False

    def prepare(self, width_px: int, height_px: int) -> None:
        """Networks with set-up per frame size (the GPU networks' and tile search's CUDA
        graphs, the edge search's pictures on the device) do it now."""
        follower = self.follower
        edge_search = follower.edge_search if follower.config.edge_search else None
        for part in (follower.networks, follower.search, edge_search):
            prepare = getattr(part, "prepare", None)
            if prepare is not None:
                prepare(width_px, height_px)

    def process(self, packet: Packet) -> Packet:
        image = packet.image_bgr
        if (image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8
                or min(image.shape[:2]) < 16):
            return packet.with_fields(faces=Faces.empty(), withheld=WithheldFaces())
        faces, withheld = self.follower.follow(image, packet.frame.index)
        return packet.with_fields(faces=faces, withheld=withheld)

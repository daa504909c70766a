"""People in view whose faces nothing found: covered, on the frames where no face is known.

Every other rule of the follower starts from a face some network saw: a track, a lost face's
cover, a weak detection, a watched place. A face that is only ever seen as a sliver gives none
of them. On the leak clip ``hidden`` followed from input frame 13 or 14 (a camera's stream
starting with the face 80-90 % behind a board) the full-range detector scores the sliver
0.13-0.14 at best, the face mesh on its place gives a presence of 0.00-0.01, and it was shown
as it is in its first frame and again as it came out (input frames 55-56), never seen whole
before.

MediaPipe's selfie segmentation (the landscape model, 256x144, shipped with mediapipe 0.10.21)
does see it: probability 1.0 over the sliver at 10 and 20 % in view, a connected region of
302-537 of its 36,864 cells (14-17 wide, 40-55 tall), while the empty frames around it give
regions of at most 85 cells on the board's edge and up to 159 cells, 5 tall, on the clips'
frame code (a band of black and white bars along the bottom edge). So on a frame where the
follower swaps and withholds nothing, :class:`FacelessPeople` runs it, and covers each region
of :data:`MIN_CELLS` cells or more and :data:`MIN_SIDE_CELLS` each way (withheld ``NO_MESH``,
no track) with its box grown by :data:`GROWTH`. A frame with any face swapped or covered does
not run it (about 3 ms on the 2-core host; nothing on the usual frame), so a second person's
sliver beside a face in view is left to the other rules.

The price: with no face known, a person whose face is not found (turned away, bent over the
desk, in the dark) is covered whole, box and all, until a face is found; and so is anything the
model takes for a person.
"""

from __future__ import annotations

import os
from typing import Any

import cv2
import numpy as np

from livecam.analysis.litert import (
    litert_interpreter,
    mediapipe_model_path,
    open_mediapipe_model,
)
from livecam.core.errors import DependencyError, ModelError
from livecam.core.types import ImageBGR, Unswappable, WithheldFaces

#: mediapipe's model (module, file), and its picture (W, H).
MODEL = ("selfie_segmentation", "selfie_segmentation_landscape.tflite")
SIZE = (256, 144)
#: A cell is a person's at this probability.
THRESHOLD = 0.5
#: A region of fewer cells of the 256x144 picture than this (about 0.3 % of the frame), or
#: fewer than :data:`MIN_SIDE_CELLS` wide or tall (40 px of a 720p frame), is left alone:
#: ``hidden``'s sliver at 10 % in view is 302 cells, 14 by 40; the empty frames' regions are
#: at most 85 cells, or 5 tall.
MIN_CELLS = 100
MIN_SIDE_CELLS = 8
#: The cover is the region's box grown by this share of its size on each side.
GROWTH = 0.1


class FacelessPeople:
    """Covers for the people in a frame where no face is known (see the module docstring).
    ``open`` checks that the model can run; it is loaded on the first frame that needs it
    (about 5 ms and 5 MB a stream, so a stream that always shows a face never pays them).
    Only the follower's thread calls :meth:`covers`."""

    def __init__(self) -> None:
        self._net: Any = None
        self._input = self._output = 0

    def open(self) -> None:
        if litert_interpreter() is None:
            raise DependencyError("advanced.analysis.cover_people needs ai-edge-litert "
                                  "(pip install ai-edge-litert), or set it to false")
        if not os.path.isfile(mediapipe_model_path(*MODEL)):
            raise ModelError(f"advanced.analysis.cover_people: no {mediapipe_model_path(*MODEL)}"
                             " (mediapipe 0.10.21 ships it); reinstall mediapipe, or set it to "
                             "false")

    def _load(self) -> Any:
        if self._net is None:
            self._net = open_mediapipe_model(*MODEL, num_threads=1)  # the follower's thread
            self._input = self._net.get_input_details()[0]["index"]
            self._output = self._net.get_output_details()[0]["index"]
        return self._net

    def mask(self, image_bgr: ImageBGR) -> np.ndarray:
        """(144, 256) float32 person probability of ``image_bgr``."""
        net = self._load()
        small = cv2.resize(image_bgr, SIZE, interpolation=cv2.INTER_AREA)
        rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
        picture = np.multiply(rgb, np.float32(1 / 255), dtype=np.float32)
        net.set_tensor(self._input, picture[None])
        net.invoke()
        return np.asarray(net.get_tensor(self._output)[0, :, :, 0], np.float32)

    def covers(self, image_bgr: ImageBGR) -> WithheldFaces:
        """The people of ``image_bgr`` to cover (withheld ``NO_MESH``, track -1): each region
        of :data:`MIN_CELLS` cells or more and :data:`MIN_SIDE_CELLS` each way, its box in the
        frame's pixels grown by :data:`GROWTH` and clipped to the frame."""
        person = (self.mask(image_bgr) >= THRESHOLD).astype(np.uint8)
        _, _, stats, _ = cv2.connectedComponentsWithStats(person, connectivity=8)
        h, w = image_bgr.shape[:2]
        sx, sy = w / SIZE[0], h / SIZE[1]
        boxes = []
        for x, y, bw, bh, cells in stats[1:].tolist():
            if cells < MIN_CELLS or min(bw, bh) < MIN_SIDE_CELLS:
                continue
            gx, gy = GROWTH * bw * sx, GROWTH * bh * sy
            boxes.append([max(0.0, x * sx - gx), max(0.0, y * sy - gy),
                          min(float(w), (x + bw) * sx + gx), min(float(h), (y + bh) * sy + gy)])
        if not boxes:
            return WithheldFaces()
        k = len(boxes)
        return WithheldFaces(np.array(boxes, np.float32), np.full((k, 0, 2), np.nan, np.float32),
                             np.full(k, -1, np.int64), np.full(k, Unswappable.NO_MESH, np.uint8))

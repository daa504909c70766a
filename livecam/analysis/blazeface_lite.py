"""MediaPipe's BlazeFace run directly on LiteRT: the same models and maths, without the graph.

``mp.solutions.face_detection`` adds about 2 ms per run around the network (a full-range run
on a 720p frame: 8.7 ms through its graph, 6.6 ms here, 5.1 of it the network itself). Here
the steps of MediaPipe's ``FaceDetection`` graph are done in numpy and OpenCV around a LiteRT
interpreter: letterbox the picture into the network input (ImageToTensor: corner-to-corner map,
bilinear, BORDER_ZERO, range [-1, 1]), run it, decode the anchors (TensorsToDetections), merge
with weighted non-max suppression (IoU > 0.3) and map back to the picture's pixels. The torch
port in ``livecam.gpupipe.networks.blazeface`` documents each step; ``tests/analysis`` compares
this one with MediaPipe's own graph.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis.anchors import FULL_RANGE_ANCHORS, SHORT_RANGE_ANCHORS, ssd_anchors
from livecam.analysis.litert import open_mediapipe_model

#: (box xyxy px (4,), score, keypoints px (6, 2)) in the picture handed to ``detect``.
Detection = tuple[npt.NDArray[np.float32], float, npt.NDArray[np.float32]]

_MODELS = {
    # file, anchors, the graph's own score threshold (see livecam.gpupipe.networks.blazeface)
    "short": ("face_detection_short_range.tflite", SHORT_RANGE_ANCHORS, 0.5),
    "full": ("face_detection_full_range_sparse.tflite", FULL_RANGE_ANCHORS, 0.6),
}
_NMS_IOU = 0.3
_NUM_KEYPOINTS = 6


class DirectBlazeFace:
    """One BlazeFace variant (``short`` or ``full``) on a LiteRT interpreter. One caller at a
    time (the interpreter is not re-entrant); :class:`BlazeFaceDetector` owns it."""

    def __init__(self, model: str, *, num_threads: int = 1,
                 min_score: float | None = None) -> None:
        filename, anchors, own_min_score = _MODELS[model]
        # None: the graph's own threshold (what MediaPipe returns); lower keeps weak ones too
        self.min_score = own_min_score if min_score is None else min_score
        self._net = open_mediapipe_model("face_detection", filename, num_threads)
        self.size_px = anchors.input_size_px
        self._anchor_xy = ssd_anchors(anchors)[:, :2].astype(np.float64)  # fixed size: 1x1
        self._input = self._net.get_input_details()[0]["index"]
        outputs = {o["shape"][-1]: o["index"] for o in self._net.get_output_details()}
        self._boxes_out, self._scores_out = outputs[4 + 2 * _NUM_KEYPOINTS], outputs[1]

    def detect(self, image_rgb: npt.NDArray[np.uint8]) -> list[Detection]:
        """Faces in an (H, W, 3) uint8 RGB picture, best first, in its pixels (see
        :data:`Detection`)."""
        crop, side, offset_xy = self._input_of(image_rgb)
        return self.detect_input(crop, side, offset_xy)

    def detect_bgr(self, image_bgr: npt.NDArray[np.uint8]) -> list[Detection]:
        """:meth:`detect` of a BGR picture: the same detections (the warp treats each channel
        alike), with only the network's input turned to RGB, not the picture (33 MB at
        3333 x 3333)."""
        crop, side, offset_xy = self._input_of(image_bgr)
        rgb = np.asarray(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB), np.uint8)
        return self.detect_input(rgb, side, offset_xy)

    def _input_of(self, image: npt.NDArray[np.uint8]
                  ) -> tuple[npt.NDArray[np.uint8], float, tuple[float, float]]:
        """The network's input sampled from ``image`` (letterboxed, channels as given), the
        picture's side and the input's (0, 0) in the picture."""
        h, w = image.shape[:2]
        side = float(max(h, w))
        k = side / self.size_px
        x0, y0 = (w - side) / 2.0, (h - side) / 2.0
        tensor_to_image = np.array([[k, 0.0, x0], [0.0, k, y0]])
        crop = cv2.warpAffine(image, tensor_to_image, (self.size_px, self.size_px),
                              flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
        return np.asarray(crop, np.uint8), side, (x0, y0)

    def input_map(self, rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64],
                  ) -> tuple[np.ndarray, np.ndarray] | None:
        """``cv2.remap`` maps (fixed point, :func:`cv2.convertMaps`) that sample a frame
        straight into this network's input as :meth:`detect` samples the picture
        ``frame[np.ix_(rows, cols)]`` (square, at least the input's size, each index one
        from the next: a mirror or a repeated row is bilinear in the frame too); None for
        any other picture. With them a strip's picture is never written."""
        if len(rows) != len(cols) or len(rows) < self.size_px:
            return None
        axes = []
        for index in (cols, rows):
            step = np.diff(index)
            if len(step) and int(np.abs(step).max()) > 1:
                return None
            # picture px sampled per input px (corner-to-corner, as detect's warpAffine)
            p = np.arange(self.size_px, dtype=np.float64) * (len(index) / self.size_px)
            i = np.minimum(np.floor(p).astype(np.int64), len(index) - 1)
            nxt = np.minimum(i + 1, len(index) - 1)
            axes.append(index[i] + (p - i) * (index[nxt] - index[i]))
        fx, fy = np.meshgrid(axes[0], axes[1])
        both = np.dstack([fx, fy]).astype(np.float32)
        convert: Any = cv2.convertMaps  # the stubs lack the (map, None) form
        map1, map2 = convert(both, None, cv2.CV_16SC2)
        return np.asarray(map1), np.asarray(map2)

    def detect_input(self, crop_rgb: npt.NDArray[np.uint8], side: float,
                     offset_xy: tuple[float, float]) -> list[Detection]:
        """:meth:`detect` from the network's input (``size_px`` square, uint8 RGB) of a
        picture ``side`` px across whose input (0, 0) lies at ``offset_xy`` in the picture."""
        x0, y0 = offset_xy
        crop = crop_rgb
        self._net.set_tensor(self._input,
                             (crop.astype(np.float32) * np.float32(2 / 255) - 1)[None])
        self._net.invoke()
        raw = self._net.get_tensor(self._boxes_out)[0].astype(np.float64)
        logits = self._net.get_tensor(self._scores_out)[0, :, 0].astype(np.float64)
        scores = 1.0 / (1.0 + np.exp(-np.clip(logits, -100.0, 100.0)))
        keep = np.flatnonzero(scores >= self.min_score)
        if keep.size == 0:
            return []
        raw, scores = raw[keep] / self.size_px, scores[keep]
        centre = raw[:, 0:2] + self._anchor_xy[keep]
        half = raw[:, 2:4] / 2.0
        boxes = np.concatenate([centre - half, centre + half], axis=1)
        points = raw[:, 4:].reshape(-1, _NUM_KEYPOINTS, 2) + self._anchor_xy[keep][:, None]
        ok = (boxes[:, 2] >= boxes[:, 0]) & (boxes[:, 3] >= boxes[:, 1])
        offset = np.array([x0, y0])
        return [((box.reshape(2, 2) * side + offset).reshape(4).astype(np.float32), score,
                 (pts * side + offset).astype(np.float32))
                for box, score, pts in _weighted_nms(boxes[ok], scores[ok], points[ok])]


def _weighted_nms(boxes: np.ndarray, scores: np.ndarray, points: np.ndarray,
                  ) -> list[tuple[np.ndarray, float, np.ndarray]]:
    """MediaPipe's WEIGHTED suppression: by falling score, a leader takes every remaining
    detection overlapping it by IoU > 0.3 (itself included); the cluster's box and keypoints
    are the score-weighted mean, its score the leader's."""
    order = np.argsort(-scores, kind="stable")
    boxes, scores, points = boxes[order], scores[order], points[order]
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    left = np.ones(len(scores), bool)
    out = []
    for i in range(len(scores)):
        if not left[i]:
            continue
        ix = np.clip(np.minimum(boxes[i, 2], boxes[:, 2]) - np.maximum(boxes[i, 0], boxes[:, 0]),
                     0, None)
        iy = np.clip(np.minimum(boxes[i, 3], boxes[:, 3]) - np.maximum(boxes[i, 1], boxes[:, 1]),
                     0, None)
        inter = ix * iy
        union = area[i] + area - inter
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
        members = left & (iou > _NMS_IOU)
        members[i] = True
        weight = scores[members] / scores[members].sum()
        out.append(((boxes[members] * weight[:, None]).sum(axis=0), float(scores[i]),
                    (points[members] * weight[:, None, None]).sum(axis=0)))
        left &= ~members
    return out

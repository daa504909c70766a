"""MediaPipe's BlazeFace face detector as one batched torch module.

The whole of MediaPipe's ``FaceDetection`` graph runs here on tensors: letterbox crop
(ImageToTensor, BORDER_ZERO, range [-1, 1]), the network (weights read from the ``.tflite``),
anchor decoding (TensorsToDetections: reverse_output_order, sigmoid with clipping at 100),
weighted non-max suppression (NonMaxSuppressionCalculator, WEIGHTED, IoU > 0.3) and projection
back to frame pixels. Outputs have a fixed size (``max_faces`` slots with a validity mask), so
one call serves many frames and the module can be captured in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from livecam.analysis.anchors import (
    FULL_RANGE_ANCHORS,
    SHORT_RANGE_ANCHORS,
    SsdAnchorOptions,
    ssd_anchor_cells,
)
from livecam.core.errors import ModelError
from livecam.gpupipe.networks.nms import weighted_nms
from livecam.gpupipe.networks.sampling import rotated_rect_grid, sample_bilinear_u8
from livecam.gpupipe.networks.tflite_torch import TfliteGraphModule

NUM_KEYPOINTS = 6


@dataclass(frozen=True)
class BlazeFaceSpec:
    """One BlazeFace variant: its model file (under mediapipe/modules/) and decoding options."""

    model_relpath: str
    anchors: SsdAnchorOptions
    min_score: float


SHORT_RANGE = BlazeFaceSpec("face_detection/face_detection_short_range.tflite",
                            SHORT_RANGE_ANCHORS, 0.5)
# Thresholds are the graphs' own (0.5 short, 0.6 full range). mediapipe 0.10.21's python
# FaceDetection(min_detection_confidence=...) does not reach them (measured: any value from 0.2
# to 0.7 gives the same detections), so these are what MediaPipe users actually get.
FULL_RANGE = BlazeFaceSpec("face_detection/face_detection_full_range_sparse.tflite",
                           FULL_RANGE_ANCHORS, 0.6)


class FaceDetections(NamedTuple):
    """Detections for B frames in ``max_faces`` fixed slots, best score first.

    boxes_xyxy_px (B, F, 4), keypoints_xy_px (B, F, 6, 2) in frame pixels (MediaPipe's
    keypoint order: right eye, left eye (of the subject), nose tip, mouth, right and left
    ear tragion), scores (B, F) in the model dtype, valid (B, F) bool. Slots past the last
    valid one hold zeros.
    """

    boxes_xyxy_px: torch.Tensor
    keypoints_xy_px: torch.Tensor
    scores: torch.Tensor
    valid: torch.Tensor


class BlazeFaceDetector(nn.Module):
    """BlazeFace on a batch of uint8 frames (see the module docstring).

    Build with :func:`livecam.gpupipe.networks.models.load_blazeface`, then ``.to(device, dtype)``.
    ``forward(images_bhwc_bgr)`` takes (B, H, W, 3) uint8 BGR frames on the module's device;
    every frame of one call shares H and W. One caller per CUDA stream.

    ``max_candidates`` is how many top-scoring anchors enter NMS (raise it for crowds: each
    face typically lights 5-30 anchors); ``nms_iterations`` bounds the fixed-point NMS (see
    :func:`weighted_nms`); ``max_faces`` is the number of output slots.
    """

    def __init__(self, net: TfliteGraphModule, spec: BlazeFaceSpec, *, max_faces: int = 8,
                 max_candidates: int = 128, nms_iterations: int = 16,
                 min_score: float | None = None, min_suppression_iou: float = 0.3) -> None:
        super().__init__()
        self.net = net
        self.spec = spec
        self.input_size_px = spec.anchors.input_size_px
        self.max_faces = max_faces
        self.max_candidates = max_candidates
        self.nms_iterations = nms_iterations
        self.min_score = spec.min_score if min_score is None else min_score
        self.min_suppression_iou = min_suppression_iou
        if not spec.anchors.fixed_anchor_size:
            raise ModelError("BlazeFaceDetector decodes fixed-size anchors only (as MediaPipe's "
                             "face detectors use)")
        # Anchor cells kept as integers so that .half() cannot round the centres (a 1e-3
        # error there is 0.2 px at 192).
        self.register_buffer("anchor_cells", torch.from_numpy(ssd_anchor_cells(spec.anchors)))
        self.anchor_offset = spec.anchors.anchor_offset

    @property
    def dtype(self) -> torch.dtype:
        """The network's dtype (float32, or float16 after ``.half()``)."""
        return next(self.net.buffers()).dtype

    def regions(self, images_bhwc_bgr: torch.Tensor, squares_xys_px: torch.Tensor | None = None,
                frame_index: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """What the network sees, as (centre (N, 2), side (N,), image index (N,)) in pixels:
        each frame letterboxed (the square of side max(H, W) centred on it), or only the
        frames ``frame_index`` (N,) long names (in that order), or with ``squares_xys_px``
        (T, 3) float32 (x0, y0, side of squares inside frame 0: tiles) each of those
        squares."""
        batch, height, width, _ = images_bhwc_bgr.shape
        device = images_bhwc_bgr.device
        if squares_xys_px is not None:
            side_px = squares_xys_px[:, 2].float()
            center = squares_xys_px[:, 0:2].float() + side_px[:, None] / 2.0
            return center, side_px, torch.zeros(len(squares_xys_px), dtype=torch.long,
                                                device=device)
        index = (torch.arange(batch, device=device) if frame_index is None
                 else frame_index.long())
        n = len(index)
        # filled on the device (no host->device copy), so a CUDA graph can capture this
        center = torch.empty((n, 2), device=device)
        center[:, 0].fill_(width / 2.0)
        center[:, 1].fill_(height / 2.0)
        side_px = torch.full((n,), float(max(height, width)), device=device)
        return center, side_px, index

    def preprocess(self, images_bhwc_bgr: torch.Tensor,
                   squares_xys_px: torch.Tensor | None = None) -> torch.Tensor:
        """(N, 3, S, S) RGB network input in [-1, 1], in the module dtype, of the squares
        :meth:`regions` gives (zeros outside the frame, as MediaPipe's BORDER_ZERO)."""
        return self._sample(images_bhwc_bgr, *self.regions(images_bhwc_bgr, squares_xys_px))

    def _sample(self, images_bhwc_bgr: torch.Tensor, center_xy_px: torch.Tensor,
                side_px: torch.Tensor, image_index: torch.Tensor) -> torch.Tensor:
        n = len(center_xy_px)
        grid = rotated_rect_grid(center_xy_px, side_px[:, None].expand(n, 2),
                                 torch.zeros(n, device=center_xy_px.device),
                                 self.input_size_px)
        pixels = sample_bilinear_u8(images_bhwc_bgr, image_index, grid, border_zero=True,
                                    channel_order=(2, 1, 0))
        return (pixels * (2.0 / 255.0) - 1.0).to(self.dtype)

    def decode(self, raw_boxes: torch.Tensor, raw_scores: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Network outputs -> boxes (B, N, 4) xyxy and keypoints (B, N, 6, 2) in [0, 1] tensor
        coordinates, scores (B, N). All in float32: decoding in fp16 would cost ~0.1 px."""
        scale = float(self.input_size_px)
        raw = raw_boxes.float()
        anchor_cells: torch.Tensor = self.anchor_cells  # type: ignore[assignment]
        cells = anchor_cells.float()
        anchor_xy = (cells[:, 0:2] + self.anchor_offset) / cells[:, 2:3]  # (N, 2); size is 1
        points = raw[..., 4:].reshape(*raw.shape[:2], NUM_KEYPOINTS, 2) / scale
        keypoints = points + anchor_xy[None, :, None, :]
        center = raw[..., 0:2] / scale + anchor_xy[None]
        half = raw[..., 2:4] / scale / 2.0
        boxes = torch.cat((center - half, center + half), dim=-1)
        scores = torch.sigmoid(raw_scores.float()[..., 0].clamp(-100.0, 100.0))
        return boxes, keypoints, scores

    def forward(self, images_bhwc_bgr: torch.Tensor,
                squares_xys_px: torch.Tensor | None = None,
                frame_index: torch.Tensor | None = None) -> FaceDetections:
        """Detections in each frame (or each frame ``frame_index`` names), or with
        ``squares_xys_px`` in each square of frame 0 (one batch entry per square, in frame
        pixels): see :meth:`regions`."""
        center, side_px, index = self.regions(images_bhwc_bgr, squares_xys_px, frame_index)
        raw_boxes, raw_scores = self.net(self._sample(images_bhwc_bgr, center, side_px, index))
        boxes, keypoints, scores = self.decode(raw_boxes, raw_scores)
        valid = (scores >= self.min_score) & (boxes[..., 2] >= boxes[..., 0]) & (
            boxes[..., 3] >= boxes[..., 1])
        out_boxes, out_points, out_scores, out_valid = weighted_nms(
            boxes, keypoints.flatten(2), scores, valid, max_out=self.max_faces,
            max_candidates=self.max_candidates, iou_threshold=self.min_suppression_iou,
            iterations=self.nms_iterations)
        # [0, 1] of each square back to frame pixels
        n = len(center)
        origin = (center - side_px[:, None] / 2.0)[:, None, None, :]
        scale = side_px[:, None, None, None]
        boxes_px = out_boxes.reshape(n, -1, 2, 2) * scale + origin
        points_px = out_points.reshape(n, -1, NUM_KEYPOINTS, 2) * scale + origin
        mask = out_valid[..., None].float()
        return FaceDetections(
            boxes_xyxy_px=boxes_px.reshape(n, -1, 4) * mask,
            keypoints_xy_px=points_px * mask[..., None],
            scores=(out_scores * mask[..., 0]).to(self.dtype),
            valid=out_valid)

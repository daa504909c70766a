"""MediaPipe's 468-point face mesh (``face_landmark.tflite``) as one batched torch module.

Reproduces MediaPipe's ``FaceLandmarkCpu`` graph: the ROI (a rotated square, see
:func:`rois_from_detections` / :func:`rois_from_landmarks`) is cropped to 192x192 with
BORDER_REPLICATE into the range [0, 1], the network predicts landmarks in crop pixels and a
face-presence logit, and ``LandmarkProjectionCalculator`` rotates and scales them back onto the
frame. Many faces from many frames go through in one call.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from livecam.analysis.roi import ROI_SCALE
from livecam.gpupipe.networks.sampling import rotated_rect_grid, sample_bilinear_u8
from livecam.gpupipe.networks.tflite_torch import TfliteGraphModule

FACE_LANDMARK_RELPATH = "face_landmark/face_landmark.tflite"
NUM_LANDMARKS = 468
INPUT_SIZE_PX = 192
# Landmarks whose line sets the ROI rotation when tracking from the previous frame's mesh.
LANDMARK_ROTATION_START, LANDMARK_ROTATION_END = 33, 263


class FaceRois(NamedTuple):
    """Rotated square crops: center_xy_px (..., 2), size_px (...,), rotation_rad (...,)."""

    center_xy_px: torch.Tensor
    size_px: torch.Tensor
    rotation_rad: torch.Tensor


class FaceMeshResult(NamedTuple):
    """landmarks_px (F, 468, 3): x, y in frame pixels and z (depth, same scale as x);
    presence (F,) in [0, 1] (MediaPipe drops faces below its min_tracking_confidence)."""

    landmarks_px: torch.Tensor
    presence: torch.Tensor


def _roi(box_xyxy_px: torch.Tensor, start_xy_px: torch.Tensor, end_xy_px: torch.Tensor,
         scale: float) -> FaceRois:
    # DetectionsToRectsCalculator (target angle 0) + RectTransformationCalculator(square_long).
    center = (box_xyxy_px[..., 0:2] + box_xyxy_px[..., 2:4]) / 2.0
    extent = box_xyxy_px[..., 2:4] - box_xyxy_px[..., 0:2]
    size = extent.max(dim=-1).values * scale
    delta = end_xy_px - start_xy_px
    angle = -torch.atan2(-delta[..., 1], delta[..., 0])
    angle = angle - 2.0 * math.pi * torch.floor((angle + math.pi) / (2.0 * math.pi))
    return FaceRois(center.float(), size.float(), angle.float())


def rois_from_detections(boxes_xyxy_px: torch.Tensor, keypoints_xy_px: torch.Tensor, *,
                         scale: float = ROI_SCALE) -> FaceRois:
    """MediaPipe's ``FaceDetectionFrontDetectionToRoi`` for BlazeFace outputs.

    ``boxes_xyxy_px`` (..., 4), ``keypoints_xy_px`` (..., 6, 2) in frame pixels; the eyes
    (keypoints 0 and 1) set the rotation.
    """
    return _roi(boxes_xyxy_px, keypoints_xy_px[..., 0, :], keypoints_xy_px[..., 1, :], scale)


def rois_from_landmarks(landmarks_px: torch.Tensor, *, scale: float = ROI_SCALE) -> FaceRois:
    """MediaPipe's ``FaceLandmarkLandmarksToRoi``: the next frame's ROI from a (..., 468, 2|3)
    mesh (bounding box of all points, rotation from landmarks 33 -> 263)."""
    xy = landmarks_px[..., 0:2]
    box = torch.cat((xy.min(dim=-2).values, xy.max(dim=-2).values), dim=-1)
    return _roi(box, xy[..., LANDMARK_ROTATION_START, :], xy[..., LANDMARK_ROTATION_END, :],
                scale)


class FaceMeshLandmarker(nn.Module):
    """The face mesh on crops of uint8 frames (see the module docstring).

    Build with :func:`livecam.gpupipe.networks.models.load_face_mesh`, then ``.to(device, dtype)``.
    ``forward(images_bhwc_bgr, image_index, rois)``: frames (B, H, W, 3) uint8 BGR, the frame of
    each face (F,) int64 and its :class:`FaceRois` with F entries, all on the module's device.
    Padding slots may hold any finite ROI; their results are simply ignored by the caller.
    One caller per CUDA stream.
    """

    def __init__(self, net: TfliteGraphModule) -> None:
        super().__init__()
        self.net = net

    @property
    def dtype(self) -> torch.dtype:
        """The network's dtype (float32, or float16 after ``.half()``)."""
        return next(self.net.buffers()).dtype

    def preprocess(self, images_bhwc_bgr: torch.Tensor, image_index: torch.Tensor,
                   rois: FaceRois) -> torch.Tensor:
        """(F, 3, 192, 192) RGB crops in [0, 1], in the module dtype."""
        size = torch.stack((rois.size_px, rois.size_px), dim=-1)
        grid = rotated_rect_grid(rois.center_xy_px, size, rois.rotation_rad, INPUT_SIZE_PX)
        pixels = sample_bilinear_u8(images_bhwc_bgr, image_index, grid, border_zero=False,
                                    channel_order=(2, 1, 0))
        return (pixels * (1.0 / 255.0)).to(self.dtype)

    def project(self, raw_landmarks: torch.Tensor, rois: FaceRois) -> torch.Tensor:
        """Network output (F, ..., 1404) in crop pixels -> (F, 468, 3) frame pixels (float32)."""
        points = raw_landmarks.float().reshape(-1, NUM_LANDMARKS, 3) / INPUT_SIZE_PX
        x = points[..., 0] - 0.5
        y = points[..., 1] - 0.5
        cos = torch.cos(rois.rotation_rad)[:, None]
        sin = torch.sin(rois.rotation_rad)[:, None]
        size = rois.size_px[:, None]
        px = rois.center_xy_px[:, None, 0] + (cos * x - sin * y) * size
        py = rois.center_xy_px[:, None, 1] + (sin * x + cos * y) * size
        return torch.stack((px, py, points[..., 2] * size), dim=-1)

    def forward(self, images_bhwc_bgr: torch.Tensor, image_index: torch.Tensor,
                rois: FaceRois) -> FaceMeshResult:
        raw_landmarks, raw_flag = self.net(self.preprocess(images_bhwc_bgr, image_index, rois))
        return FaceMeshResult(self.project(raw_landmarks, rois),
                              torch.sigmoid(raw_flag.float().reshape(-1)))

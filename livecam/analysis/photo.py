"""Analyse one still photo: every face, its box, 6 keypoints and face mesh (for identities)."""

from __future__ import annotations

import numpy as np

from livecam.analysis.detect import BlazeFaceDetector
from livecam.analysis.landmarks import six_keypoints
from livecam.analysis.mesh import FaceMeshLandmarker
from livecam.analysis.roi import boxes_from_landmarks, roi_from_detection
from livecam.core.types import Faces, ImageBGR


def analyze_photo(image_bgr: ImageBGR, *, max_faces: int = 16, min_score: float = 0.5,
                  refine_landmarks: bool = False, detector_model: str = "auto",
                  tile_size_px: int = 384) -> Faces:
    """Detect every face in a still photo and fit the face mesh to each.

    Returns :class:`Faces` sorted largest first: ``boxes_xyxy`` (N, 4) float32 px around the
    landmarks, ``scores`` (N,) detector scores, ``keypoints_xy`` (N, 6, 2) from the mesh in
    BlazeFace order, ``landmarks_xy`` (N, 468|478, 2) float32 px, ``landmarks_z`` (N, K) float32
    px, ``track_ids`` all -1. Faces the mesh rejects are dropped. An image with no face, or one
    too small or not (H, W, 3) uint8, gives an empty ``Faces``.
    Loads the models on each call (~0.3 s); any thread.
    """
    image_bgr = np.asarray(image_bgr)
    if image_bgr.dtype != np.uint8:
        raise TypeError(f"image_bgr must be uint8, got {image_bgr.dtype}")
    if image_bgr.ndim != 3 or image_bgr.shape[2] != 3:
        raise ValueError(f"image_bgr must be (H, W, 3), got {image_bgr.shape}")
    detector = BlazeFaceDetector(model=detector_model, min_score=min_score,
                                 max_faces=max_faces, tile_size_px=tile_size_px)
    with detector, FaceMeshLandmarker(refine_landmarks=refine_landmarks) as mesh:
        dets = detector.detect(image_bgr, all_tiles=True)
        rois = [roi_from_detection(dets.boxes_xyxy[i], dets.keypoints_xy[i])
                for i in range(len(dets))]
        results = mesh.landmarks(image_bgr, rois)
    keep = [i for i, r in enumerate(results) if r is not None]
    if not keep:
        return Faces.empty()
    xy = np.stack([results[i].landmarks_xy for i in keep])  # type: ignore[union-attr]
    z = np.stack([results[i].landmarks_z for i in keep])  # type: ignore[union-attr]
    faces = Faces(boxes_xyxy=boxes_from_landmarks(xy), scores=dets.scores[keep],
                  keypoints_xy=six_keypoints(xy), landmarks_xy=xy, landmarks_z=z,
                  track_ids=np.full(len(keep), -1, np.int64))
    order = np.argsort(-faces.areas_px, kind="stable")
    return faces[order]

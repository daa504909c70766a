"""Fill the hidden side of a turned source face from its mirror image.

A 3/4-view photo shows one cheek foreshortened (or not at all); warped onto a live face that
looks straight on, those few pixels stretch into blotches and a broken nose. Faces are nearly
symmetric, so the photo's mirror image is a good stand-in for the hidden side. At identity load
(never per frame) :func:`frontalize` builds a new texture on a symmetric, roughly frontal
layout (the mean of the mesh and its mirrored mesh): each triangle is taken from the original or
from the mirror image, whichever shows it larger, with a soft transition between the two.
A near-frontal photo is returned unchanged, so its asymmetric details stay.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from livecam.swap.mesh import MeshTopology
from livecam.swap.mirror_map import MIRROR
from livecam.swap.warp import DenseWarper, SourceMesh

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

# Share of a triangle's (original + mirrored) area the original must have to be used alone.
_PREFER_ORIGINAL = (0.2, 0.33)
# Below this fraction of triangles needing the mirror the photo counts as frontal enough.
_MIN_MIRRORED_FRACTION = 0.02


def mirrored_landmarks(landmarks_xy: FloatArray, landmarks_z: FloatArray,
                       width_px: int) -> tuple[FloatArray, FloatArray]:
    """The mesh of the horizontally flipped image (landmark order kept anatomical)."""
    idx = np.asarray(MIRROR)
    xy = landmarks_xy[idx].copy()
    xy[:, 0] = (width_px - 1) - xy[:, 0]
    return xy.astype(np.float32), landmarks_z[idx].astype(np.float32)


def _area2(xy: FloatArray, topology: MeshTopology) -> FloatArray:
    tri = xy[topology.triangles]
    e1 = tri[:, 1] - tri[:, 0]
    e2 = tri[:, 2] - tri[:, 0]
    return (e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]).astype(np.float32)


def frontalize(texture_bgr: ImageBGR, landmarks_xy: FloatArray, landmarks_z: FloatArray,
               topology: MeshTopology) -> tuple[ImageBGR, FloatArray, FloatArray, float]:
    """(texture, landmarks_xy, landmarks_z, mirrored_fraction) with the hidden side filled.

    Inputs: ``texture_bgr`` (h, w, 3) uint8, ``landmarks_xy`` (468, 2) and ``landmarks_z``
    (468,) float32 in its pixels. ``mirrored_fraction`` is the share of triangles taken (at
    least partly) from the mirror image; 0 means the input came back unchanged.
    """
    h, w = texture_bgr.shape[:2]
    flip_xy, flip_z = mirrored_landmarks(landmarks_xy, landmarks_z, w)
    sym_xy = ((landmarks_xy + flip_xy) / 2).astype(np.float32)
    # triangle winding is arbitrary in the topology: the symmetric layout faces the camera,
    # so its winding says which sign means "visible"
    facing = np.sign(_area2(sym_xy, topology))
    area_orig = np.clip(_area2(landmarks_xy, topology) * facing, 0.0, None)
    area_flip = np.clip(_area2(flip_xy, topology) * facing, 0.0, None)
    share = area_orig / np.maximum(area_orig + area_flip, 1e-6)
    lo, hi = _PREFER_ORIGINAL
    weight = np.clip((share - lo) / (hi - lo), 0.0, 1.0)
    surface = topology.hole_of_triangle == 0
    mirrored = float(np.mean(weight[surface] < 1.0))
    if mirrored < _MIN_MIRRORED_FRACTION:
        return texture_bgr, landmarks_xy, landmarks_z, 0.0
    sym_z = ((landmarks_z + flip_z) / 2).astype(np.float32)
    warper = DenseWarper(topology, step_px=1)
    orig = warper.warp(SourceMesh.build(texture_bgr, landmarks_xy, topology), sym_xy, sym_z,
                       (h, w))
    flip = warper.warp(SourceMesh.build(np.ascontiguousarray(texture_bgr[:, ::-1]), flip_xy,
                                        topology), sym_xy, sym_z, (h, w))
    if orig is None or flip is None:
        return texture_bgr, landmarks_xy, landmarks_z, 0.0
    x1, y1, x2, y2 = orig.box_xyxy
    table = np.concatenate([[1.0], weight]).astype(np.float32)
    alpha = table[orig.tri_id_coarse]
    # soften the seams between triangles taken from different images
    k = max(3, int((x2 - x1) * 0.03) | 1)
    alpha = cv2.GaussianBlur(alpha, (k, k), 0)[:, :, None]
    out = texture_bgr.copy()
    region = orig.warped_bgr.astype(np.float32) * alpha + flip.warped_bgr.astype(np.float32) * (
        1.0 - alpha)
    mixed = np.clip(region + 0.5, 0, 255).astype(np.uint8)
    outside = orig.tri_id_coarse == 0  # keep the photo itself around the mesh
    mixed[outside] = texture_bgr[y1:y2, x1:x2][outside]
    out[y1:y2, x1:x2] = mixed
    return out, sym_xy, sym_z, mirrored

"""Dense warp: one map + one remap equals per-triangle warpAffine, grid steps, frame edges."""

from __future__ import annotations

import cv2
import numpy as np

from livecam.swap.mesh import MeshTopology
from livecam.swap.warp import DenseWarper, SourceMesh, face_box
from tests.helpers.swap_eval import RealFace


def _reference_per_triangle(source: SourceMesh, target_xy: np.ndarray, topology: MeshTopology,
                            shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The slow textbook warp: one warpAffine + mask per triangle (what the dense map replaces)."""
    out = np.zeros((*shape, 3), np.uint8)
    covered = np.zeros(shape, np.uint8)
    for tri in topology.triangles:
        src = source.landmarks_xy[tri].astype(np.float32)
        dst = target_xy[tri].astype(np.float32)
        area = (dst[1, 0] - dst[0, 0]) * (dst[2, 1] - dst[0, 1]) - \
               (dst[2, 0] - dst[0, 0]) * (dst[1, 1] - dst[0, 1])
        if abs(area) < 1e-3:
            continue
        m = cv2.getAffineTransform(dst, src)
        warped = cv2.warpAffine(source.texture_bgr, m, (shape[1], shape[0]),
                                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                borderMode=cv2.BORDER_REPLICATE)
        mask = np.zeros(shape, np.uint8)
        cv2.fillConvexPoly(mask, np.round(dst * 16).astype(np.int32), 1, cv2.LINE_8, 4)
        out[mask > 0] = warped[mask > 0]
        covered |= mask
    return out, covered


def test_dense_map_matches_per_triangle_warp(faces: list[RealFace],
                                             topology: MeshTopology) -> None:
    src_face, tgt_face = faces[0], faces[3]  # astronaut onto t1-2 (near frontal)
    source = SourceMesh.build(src_face.image_bgr, src_face.landmarks_xy, topology)
    shape = tgt_face.image_bgr.shape[:2]
    result = DenseWarper(topology, step_px=1).warp(source, tgt_face.landmarks_xy,
                                                   tgt_face.landmarks_z, shape)
    assert result is not None
    x1, y1, x2, y2 = result.box_xyxy
    # the reference works in the box's own coordinates (full-frame warps would be slow)
    ref, covered = _reference_per_triangle(
        source, tgt_face.landmarks_xy - np.array([x1, y1], np.float32), topology,
        (y2 - y1, x2 - x1))
    inside = covered > 0
    # stay off triangle edges, where the two methods may pick different neighbours
    inside = cv2.erode(inside.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    diff = np.abs(result.warped_bgr.astype(int) - ref.astype(int))[inside]
    assert inside.sum() > 5000
    assert np.median(diff) <= 1
    assert (diff.max(axis=1) <= 3).mean() > 0.97
    # a coarse grid differs only slightly from the exact map
    coarse = DenseWarper(topology, step_px=3).warp(source, tgt_face.landmarks_xy,
                                                    tgt_face.landmarks_z, shape)
    assert coarse is not None
    # compare in frame coordinates (each grid snaps its box origin to its own step)
    canvas_fine = np.zeros((*shape, 3), np.uint8)
    canvas_coarse = np.zeros((*shape, 3), np.uint8)
    canvas_fine[y1:y2, x1:x2] = result.warped_bgr
    cx1, cy1, cx2, cy2 = coarse.box_xyxy
    canvas_coarse[cy1:cy2, cx1:cx2] = coarse.warped_bgr
    region = np.zeros(shape, bool)
    region[y1:y2, x1:x2] = inside
    region[:, :cx1] = False
    region[:cy1] = False
    region[:, cx2:] = False
    region[cy2:] = False
    cdiff = np.abs(canvas_coarse.astype(int) - canvas_fine.astype(int))[region]
    assert region.sum() > 4000
    assert np.mean(cdiff) < 4.0


def test_face_partly_outside_the_frame_is_warped_inside_it(faces: list[RealFace],
                                                           topology: MeshTopology) -> None:
    src_face, tgt_face = faces[0], faces[1]
    source = SourceMesh.build(src_face.image_bgr, src_face.landmarks_xy, topology)
    # shift the target mesh so its left 40 % leaves the frame
    xy = tgt_face.landmarks_xy.copy()
    span = xy[:, 0].max() - xy[:, 0].min()
    xy[:, 0] -= xy[:, 0].min() + 0.4 * span
    result = DenseWarper(topology, step_px=2).warp(source, xy, tgt_face.landmarks_z, (400, 600))
    assert result is not None
    x1, y1, x2, y2 = result.box_xyxy
    assert x1 == 0 and x2 <= 600 and y2 <= 400
    assert result.warped_bgr.shape == (y2 - y1, x2 - x1, 3)
    assert (result.tri_id_coarse > 0).mean() > 0.3
    # entirely outside: nothing to do
    xy_out = xy - np.array([1000, 0], np.float32)
    assert DenseWarper(topology).warp(source, xy_out, tgt_face.landmarks_z, (400, 600)) is None
    assert face_box(xy_out, (400, 600), 2) is None


def test_turned_head_hides_far_triangles_instead_of_folding(faces: list[RealFace],
                                                             topology: MeshTopology) -> None:
    """Painter's order by depth: squeezing one side of the mesh past the nose (a strong turn)
    leaves the near side's triangles on top where the two overlap."""
    src_face, tgt_face = faces[0], faces[3]
    source = SourceMesh.build(src_face.image_bgr, src_face.landmarks_xy, topology)
    xy = tgt_face.landmarks_xy.copy()
    z = tgt_face.landmarks_z.copy()
    nose_x = xy[1, 0]
    right = xy[:, 0] < nose_x
    xy[right, 0] = nose_x - (nose_x - xy[right, 0]) * -0.2  # fold the right half over the nose
    z[right] += 50.0  # and push it away from the camera
    result = DenseWarper(topology, step_px=1).warp(source, xy, z, tgt_face.image_bgr.shape[:2])
    assert result is not None
    ids = result.tri_id_coarse[result.tri_id_coarse > 0] - 1
    tris = topology.triangles[ids]
    shown_right = right[tris].all(axis=1).mean()
    assert shown_right < 0.05  # the folded, far half is (almost) never on top

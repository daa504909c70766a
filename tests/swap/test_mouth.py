"""The mouth (issue 42): a smiling source's teeth never show on a closed live mouth, and the
lips of a closed mouth are painted from the source's lips, not from whatever lies far away.

Real faces (skimage's astronaut smiling with her teeth shown, matplotlib's Grace Hopper with her
mouth closed), enlarged to webcam size (260 px). Measured before the fix: on Hopper's closed
mouth the astronaut's teeth left 42 teeth-coloured pixels in the lips (0 in the input; 4 after,
lip highlights), and grid points of the closed mouth's sliver triangles read the source up to
28 px outside its lips (dark rings on the lip line; 0.5 px after).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.config.swap import SwapConfig
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import MeshTopology
from livecam.swap.warp import DenseWarper
from tests.helpers.hard_set import hopper_face
from tests.helpers.swap_eval import RealFace, enlarged, source_from, swap_pair


@pytest.fixture(scope="module")
def closed_mouth() -> RealFace:
    return enlarged(hopper_face(), 260.0)


def _lips_hull(xy: np.ndarray, topology: MeshTopology) -> np.ndarray:
    return cv2.convexHull(np.round(xy[topology.lips]).astype(np.int32))


def _teeth_pixels(image: np.ndarray, face: RealFace, topology: MeshTopology) -> int:
    """Pixels in the face's lips that look like teeth: much lighter than the lips' median and
    nearly grey (OpenCV 8-bit Lab)."""
    inside = np.zeros(image.shape[:2], np.uint8)
    cv2.fillConvexPoly(inside, _lips_hull(face.landmarks_xy, topology), (1,))
    lab = cv2.cvtColor(image, cv2.COLOR_BGR2LAB).astype(np.float32)[inside > 0]
    chroma = np.hypot(lab[:, 1] - 128.0, lab[:, 2] - 128.0)
    return int(np.sum((lab[:, 0] > np.median(lab[:, 0]) + 25.0) & (chroma < 18.0)))


def test_a_smiling_sources_teeth_do_not_show_on_a_closed_mouth(
        by_label: dict[str, RealFace], topology: MeshTopology, closed_mouth: RealFace) -> None:
    smiling = enlarged(by_label["astronaut"], 260.0)
    swapper = ClassicFaceSwapper(SwapConfig(), topology)
    assert _teeth_pixels(closed_mouth.image_bgr, closed_mouth, topology) == 0
    opened = swap_pair(swapper, source_from(smiling, topology, close_mouth=False), closed_mouth)
    closed = swap_pair(swapper, source_from(smiling, topology, close_mouth=True), closed_mouth)
    assert _teeth_pixels(opened, closed_mouth, topology) > 20  # the defect, without the fix
    assert _teeth_pixels(closed, closed_mouth, topology) <= 6  # 4 measured: lip highlights


@pytest.mark.parametrize("step_px", [2, 3])
@pytest.mark.parametrize("source_label", ["astronaut", "t1-2", "t1-3"])
def test_a_closed_mouth_reads_only_the_sources_lips(
        by_label: dict[str, RealFace], topology: MeshTopology, closed_mouth: RealFace,
        source_label: str, step_px: int) -> None:
    source = source_from(enlarged(by_label[source_label], 260.0), topology)
    warp = DenseWarper(topology).warp(source.mesh, closed_mouth.landmarks_xy,
                                      closed_mouth.landmarks_z,
                                      closed_mouth.image_bgr.shape[:2], step_px=step_px)
    assert warp is not None
    x1, y1 = warp.box_xyxy[:2]
    hc, wc = warp.coarse_shape
    gx = x1 + (np.arange(wc) + 0.5) * step_px - 0.5
    gy = y1 + (np.arange(hc) + 0.5) * step_px - 0.5
    target_lips = _lips_hull(closed_mouth.landmarks_xy, topology)
    source_lips = _lips_hull(source.mesh.landmarks_xy, topology)
    outside = [-cv2.pointPolygonTest(source_lips, (float(warp.map_coarse[i, j, 0]),
                                                   float(warp.map_coarse[i, j, 1])), True)
               for i in range(hc) for j in range(wc)
               if cv2.pointPolygonTest(target_lips, (float(gx[j]), float(gy[i])), False) >= 0]
    assert len(outside) > 50
    assert max(outside) <= 2.0, f"a lip pixel read {max(outside):.1f} px outside the lips"


def test_an_open_mouth_keeps_the_photos_own_texture(by_label: dict[str, RealFace],
                                                    topology: MeshTopology) -> None:
    """The painted texture is for closed mouths only: around an open live mouth (which shows
    the streamer's own interior) the photo's own lips and teeth stay, as the identity judge
    scores them (painted at every opening it missed its goals: docs/classic-swap.md)."""
    smiling = enlarged(by_label["astronaut"], 260.0)
    open_mouth = enlarged(by_label["t1-3"], 260.0)
    swapper = ClassicFaceSwapper(SwapConfig(), topology)
    own = swap_pair(swapper, source_from(smiling, topology, close_mouth=False), open_mouth)
    both = swap_pair(swapper, source_from(smiling, topology, close_mouth=True), open_mouth)
    assert np.array_equal(own, both)

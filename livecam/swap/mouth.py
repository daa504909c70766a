"""The source photo's mouth, closed: its teeth and the dark of its open mouth painted over with
its own lip colour (a second texture, built at identity load).

Between a smiling source's inner lip contour lie its teeth. The mesh's mouth hole is filled
with a zig-zag strip, and the lip triangles along the inner contour reach a pixel or two past
the real lip edge, so on a streamer whose mouth is closed the source's teeth would show as a
jagged white strip along the lip line. The classic swap uses the closed texture while the
live mouth is closed (``SourceFace.closed_mesh``); an open live mouth shows the streamer's own
mouth interior (``swap.keep_mouth``) and the photo's own texture around it. Pure functions;
any thread.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis import geometry
from livecam.swap.accessories import fill_hole
from livecam.swap.mesh import MeshTopology

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

# How far past the inner lip contour (a fraction of the face width) the fill reaches: the
# contour's landmarks sit a pixel or two inside the real lip edge
_GROW = 0.025


def mouth_hole(shape_hw: tuple[int, int], landmarks_xy: FloatArray,
               topology: MeshTopology) -> npt.NDArray[np.uint8]:
    """(h, w) uint8, 255 inside the inner lip contour grown by ``_GROW`` face widths."""
    xy = landmarks_xy[:468]
    hole = np.zeros(shape_hw, np.uint8)
    cv2.fillPoly(hole, [np.round(xy[topology.mouth_inner]).astype(np.int32)], (255,))
    grow = max(3, int(geometry.face_width_px(xy) * _GROW)) | 1
    return np.asarray(cv2.dilate(hole, cv2.getStructuringElement(cv2.MORPH_ELLIPSE,
                                                                 (grow, grow))), np.uint8)


def close_mouth(texture_bgr: ImageBGR, landmarks_xy: FloatArray,
                topology: MeshTopology) -> ImageBGR:
    """``texture_bgr`` (H, W, 3) uint8 with its mouth interior (:func:`mouth_hole`) filled
    with the colour of the lips around it (a normalised blur of the lip pixels, widened until
    every hole pixel has lips near it), feathered by a pixel. A new image; the input is not
    changed. ``landmarks_xy`` (468+, 2) are the photo's mesh points."""
    xy = landmarks_xy[:468]
    shape = (int(texture_bgr.shape[0]), int(texture_bgr.shape[1]))
    hole = mouth_hole(shape, xy, topology)
    if not hole.any():
        return texture_bgr.copy()
    lips = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(lips, cv2.convexHull(np.round(xy[topology.lips]).astype(np.int32)),
                       (1,))
    keep = ((lips > 0) & (hole == 0)).astype(np.float32)
    # narrow first: the nearest lip's colour and shading
    return fill_hole(texture_bgr, hole, keep, geometry.face_width_px(xy), (0.05, 0.12, 0.3))

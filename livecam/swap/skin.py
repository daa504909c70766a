"""Which pixels of a source photo's face may be pasted: its skin and features, not hair,
background or skin a turned head hides.

What the classic swap pastes is whatever the source photo shows inside its face mesh. Hair over a
cheek or a temple became dark streaks and blocks on the live face, background beside a turned
face's far cheek brownish smudges, and the far cheek itself a few stretched pixels. Once per
photo (identity load), :func:`usable_map` marks:

1. **Skin.** A colour model of this face's skin (robust median and spread in Lab of patches on
   the cheeks, nose, chin and mid-forehead) against the colours just outside its face oval (hair
   and background, clustered): a pixel is *not* skin when it is far from the skin colour and
   clearly nearer to an outside colour, or off the skin colour and much busier than skin
   (strands), or very far from the skin colour. Only a band along the outline and the forehead
   are judged (hair and background reach in from the edge); the eyes, brows, lips and nose
   never are: they are the person. The result is smoothed (no specks, no jagged seam).
2. **Seen.** Triangles a turned head foreshortens to less than a third of their mirror image.

The swap leaves what is not usable out of its mask (``advanced.swap.source_skin_only``), so the live
face's own skin shows there, blended in like the rest of the mask's edge and colour-matched by
the colour transfer's edge band. (Filling those pixels from the mirror side or by smooth
inpainting was tried: the seams showed as stripes once the small photo was enlarged.) A fringe
over the whole forehead is left to ``advanced.swap.forehead: auto``, which cuts the forehead off.

Pure functions, any thread (~0.1 s per photo).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis import geometry
from livecam.swap.mesh import MeshTopology
from livecam.swap.mirror_map import MIRROR

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

# Patches sampled for the skin colour (MediaPipe indices): cheeks, under the eyes, nose bridge,
# chin, mid-forehead.
_SKIN_SAMPLES = (50, 280, 205, 425, 101, 330, 117, 346, 187, 411, 36, 266, 6, 197, 199, 175, 151,
                 9, 8)
# Feature groups that are never replaced: (points, growth about their centre).
_FEATURES: tuple[tuple[tuple[int, ...], float], ...] = (
    ((7, 33, 246, 161, 160, 159, 158, 157, 173, 133, 155, 154, 153, 145, 144, 163), 1.4),
    ((249, 263, 466, 388, 387, 386, 385, 384, 398, 362, 382, 381, 380, 374, 373, 390), 1.4),
    ((46, 52, 53, 55, 63, 65, 66, 70, 105, 107), 1.15),
    ((276, 282, 283, 285, 293, 295, 296, 300, 334, 336), 1.15),
    ((61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185),
     1.2),
    ((1, 2, 4, 5, 19, 45, 48, 64, 94, 97, 98, 115, 220, 275, 278, 294, 326, 327, 344, 440, 195),
     1.15),
)
# Lab axes weights for the colour distances: lightness varies with shading, so it counts less.
_AXIS_WEIGHT = np.array([0.75, 1.0, 1.0], np.float32)
_SPREAD_FLOOR = np.array([6.0, 2.5, 2.5], np.float32)  # 8-bit Lab units
_FAR = 5.0  # this far from the skin colour (in spreads): not skin whatever else is near
_NEAR = 2.5  # this near: skin whatever else is near
_OUTSIDE_RATIO = 0.6  # in between: not skin when an outside colour is this much nearer
# ... or when it is this far from the skin colour and this many times busier than skin
_BUSY_NEAR = 1.5
_BUSY_FACTOR = 3.5
# Hair and background reach into the face from its outline: only a band this wide (face
# widths) inside the oval, and the forehead, are judged; the middle of the face is the person.
_BAND = 0.12
_OUTSIDE_CLUSTERS = 4
# A triangle showing less than this share of (itself + its mirror image) is "not seen".
_SEEN_SHARE = 0.3


def _polygon(shape_hw: tuple[int, int], points_xy: FloatArray, scale: float = 1.0,
             hull: bool = False, into: npt.NDArray[np.uint8] | None = None,
             ) -> npt.NDArray[np.uint8]:
    """(h, w) uint8 255 inside the polygon, else 0; drawn onto ``into`` (the union) when
    given."""
    centre = points_xy.mean(axis=0)
    pts = centre + (points_xy - centre) * np.float32(scale)
    if hull:
        pts = cv2.convexHull(pts.astype(np.float32)).reshape(-1, 2)
    mask = np.zeros(shape_hw, np.uint8) if into is None else into
    cv2.fillPoly(mask, [np.round(pts * 16).astype(np.int32)], (255,), cv2.LINE_8, 4)
    return mask


def feature_mask(shape_hw: tuple[int, int], landmarks_xy: FloatArray) -> npt.NDArray[np.uint8]:
    """(h, w) uint8 255 on the eyes, brows, lips and nose (grown a little), else 0."""
    mask = np.zeros(shape_hw, np.uint8)
    for points, scale in _FEATURES:
        _polygon(shape_hw, landmarks_xy[list(points)], scale, hull=True, into=mask)
    return mask


def _lab_distance(lab: FloatArray, centre: FloatArray, spread: FloatArray) -> FloatArray:
    d = (lab - centre) / spread * _AXIS_WEIGHT
    return np.sqrt((d * d).sum(axis=-1))


def skin_map(texture_bgr: ImageBGR, landmarks_xy: FloatArray,
             topology: MeshTopology) -> FloatArray:
    """(h, w) float32, 1 where the face shows skin (or a feature), 0 on hair and background
    inside the face oval (and 0 outside the oval). See the module docstring."""
    h, w = texture_bgr.shape[:2]
    lab = np.asarray(cv2.cvtColor(texture_bgr, cv2.COLOR_BGR2LAB), np.float32)
    oval = _polygon((h, w), landmarks_xy[topology.face_oval])
    face_w = geometry.face_width_px(landmarks_xy)
    r = max(1, int(face_w * 0.025))
    samples = []
    for i in _SKIN_SAMPLES:
        x, y = (round(float(v)) for v in landmarks_xy[i])
        x, y = min(max(x, r), w - r - 1), min(max(y, r), h - r - 1)
        samples.append(lab[y - r:y + r + 1, x - r:x + r + 1].reshape(-1, 3))
    skin = np.concatenate(samples)
    centre = np.median(skin, axis=0)
    spread = np.maximum(np.median(np.abs(skin - centre), axis=0) * 1.4826, _SPREAD_FLOOR)
    d_skin = _lab_distance(lab, centre, spread)
    ring_px = max(3, int(face_w * 0.2)) | 1
    ring = np.asarray(cv2.dilate(oval, np.ones((ring_px, ring_px), np.uint8)), np.uint8) & ~oval
    outside = lab[ring > 0]
    not_skin = d_skin > _FAR
    if len(outside) >= 4 * _OUTSIDE_CLUSTERS:
        criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 1.0)
        cv2.setRNGSeed(0)  # k-means++ seeding: the same clusters for the same photo
        kmeans: Any = cv2.kmeans  # the stubs want UMat; numpy arrays are what it takes
        _, _, clusters = kmeans(np.ascontiguousarray(outside), _OUTSIDE_CLUSTERS, None,
                                criteria, 2, cv2.KMEANS_PP_CENTERS)
        # an outside colour that is itself skin-like (a neck, a bare shoulder) is no evidence
        clusters = [c for c in clusters if _lab_distance(c[None], centre, spread)[0] > _NEAR]
        if clusters:
            d_out = np.min([_lab_distance(lab, c, spread) for c in clusters], axis=0)
            not_skin |= (d_skin > _NEAR) & (d_out < _OUTSIDE_RATIO * d_skin)
    # hair is busy (strands), skin smooth: a pixel both off the skin colour and much busier
    # than the skin samples is hair, however close its colour
    grey = lab[:, :, 0]
    k_busy = max(3, int(face_w * 0.04)) | 1
    mean = cv2.blur(grey, (k_busy, k_busy))
    busy = np.sqrt(np.maximum(cv2.blur(grey * grey, (k_busy, k_busy)) - mean * mean, 0.0))
    skin_busy = float(np.median(np.concatenate([
        busy[max(0, int(y) - r):int(y) + r + 1, max(0, int(x) - r):int(x) + r + 1].ravel()
        for x, y in landmarks_xy[list(_SKIN_SAMPLES)]])))
    not_skin |= (d_skin > _BUSY_NEAR) & (busy > _BUSY_FACTOR * max(skin_busy, 1.0))
    judged = np.asarray(cv2.distanceTransform(oval, cv2.DIST_L2, 3), np.float32) < _BAND * face_w
    judged |= _below_brows((h, w), landmarks_xy) == 0
    not_skin &= judged
    valid = (~not_skin).astype(np.float32)
    # small specks (pores, noise, a mole) are not hair: close the skin over them; thin skin
    # slivers between strands are not skin to keep: open them away; then grow what is
    # replaced a little, so the seam lies in skin, not along the last strand
    k = max(3, int(face_w * 0.03)) | 1
    kernel = np.ones((k, k), np.uint8)
    valid = np.asarray(cv2.morphologyEx(valid, cv2.MORPH_CLOSE, kernel), np.float32)
    valid = np.asarray(cv2.morphologyEx(valid, cv2.MORPH_OPEN, kernel), np.float32)
    grow = max(3, int(face_w * 0.02)) | 1
    shrunk = np.asarray(cv2.erode(valid, np.ones((grow, grow), np.uint8)), np.float32)
    valid = np.where(judged, shrunk, valid).astype(np.float32)
    # a smooth seam: a jagged one, stretched by the warp, shows as stripes
    valid = (np.asarray(cv2.GaussianBlur(valid, (0, 0), face_w * 0.03), np.float32) > 0.5
             ).astype(np.float32)
    valid[feature_mask((h, w), landmarks_xy) > 0] = 1.0
    valid[oval == 0] = 0.0
    return valid


def _seen_map(shape_hw: tuple[int, int], landmarks_xy: FloatArray, flip_xy: FloatArray,
              topology: MeshTopology) -> FloatArray:
    """(h, w) float32: 0 on triangles a turned head foreshortens (compared with their mirror
    image), 1 elsewhere."""
    def area2(xy: FloatArray) -> FloatArray:
        tri = xy[topology.triangles]
        e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
        return (e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]).astype(np.float32)

    sym = (landmarks_xy + flip_xy) / 2
    facing = np.sign(area2(sym))
    own = np.clip(area2(landmarks_xy) * facing, 0.0, None)
    mirrored = np.clip(area2(flip_xy) * facing, 0.0, None)
    share = own / np.maximum(own + mirrored, 1e-6)
    seen = np.ones(shape_hw, np.float32)
    for t in np.flatnonzero((share < _SEEN_SHARE) & (topology.hole_of_triangle == 0)):
        pts = np.round(landmarks_xy[topology.triangles[t]] * 16).astype(np.int32)
        cv2.fillConvexPoly(seen, pts, (0.0,), cv2.LINE_8, 4)
    return seen


def usable_map(texture_bgr: ImageBGR, landmarks_xy: FloatArray,
               topology: MeshTopology) -> npt.NDArray[np.uint8]:
    """(h, w) uint8: 255 where the photo shows this face's skin or features and the head's turn
    shows the skin fully, 0 on hair, background and foreshortened skin inside the face oval
    (and outside it). ``texture_bgr`` (h, w, 3) uint8 with its mesh ``landmarks_xy`` (468, 2).
    """
    h, w = texture_bgr.shape[:2]
    xy = landmarks_xy[:468].astype(np.float32)
    valid = skin_map(texture_bgr, xy, topology)
    idx = np.asarray(MIRROR)
    flip_xy = xy[idx].copy()
    flip_xy[:, 0] = (w - 1) - flip_xy[:, 0]
    seen = _seen_map((h, w), xy, flip_xy, topology)
    valid = np.minimum(valid, np.maximum(seen, feature_mask((h, w), xy) / 255.0))
    return np.where(valid > 0.5, 255, 0).astype(np.uint8)


def _below_brows(shape_hw: tuple[int, int], landmarks_xy: FloatArray) -> FloatArray:
    """(h, w) float32: 0 above a line just over the brows (following head roll), 1 below."""
    a, b = landmarks_xy[105], landmarks_xy[334]
    along = (b - a) / max(float(np.linalg.norm(b - a)), 1e-6)
    up = np.array([along[1], -along[0]], np.float32)
    if float(np.dot(up, landmarks_xy[10] - landmarks_xy[152])) < 0:
        up = -up
    lift = 0.15 * float(np.linalg.norm(b - a))
    yy, xx = np.mgrid[0:shape_hw[0], 0:shape_hw[1]].astype(np.float32)
    height = (xx - a[0]) * up[0] + (yy - a[1]) * up[1] - lift
    return (height < 0).astype(np.float32)

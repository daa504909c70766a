"""A judge of the classic swap's look that is not livecam's own code: colour by CIEDE2000
(scikit-image), colours foreign to both people, accessories shown or kept, identity by dlib.

Regions come from the target's mesh (MediaPipe, found on the target's own image) and the
accessory masks the hard set drew (``tests.helpers.hard_set``); colours are judged in
scikit-image's CIE Lab (D65), never in livecam's OpenCV Lab. Pure functions; any thread.
"""

from __future__ import annotations

from itertools import pairwise

import cv2
import numpy as np
import numpy.typing as npt

from tests.helpers.hard_set import HardFace, relight

ImageBGR = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]

_BIN = 4.0  # Lab units per histogram bin of the foreign-colour test
_LEAK_DE = 15.0  # CIE76 difference that counts as a shown accessory pixel
_KEPT_DE = 12.0  # CIE76 difference within which a target's glasses pixel counts as kept


def lab(image_bgr: ImageBGR, where: Mask | None = None) -> npt.NDArray[np.float64]:
    """CIE Lab (D65) of ``image_bgr``'s pixels: (H, W, 3), or (N, 3) for the pixels of
    ``where``."""
    from skimage.color import rgb2lab

    px = image_bgr if where is None else image_bgr[where][None]
    out = np.asarray(rgb2lab(px[..., ::-1].astype(np.float64) / 255.0), np.float64)
    return out if where is None else out[0]


def skin_region(face: HardFace) -> Mask:
    """The target's cheek, nose, chin and brow-level skin: inside the face outline (inset by
    4 % of the face width), below the brows, without the eyes, brows, lips and accessories."""
    from livecam.swap.mesh import build_topology

    topo = build_topology()
    xy = face.face.landmarks_xy
    shape = face.face.image_bgr.shape[:2]
    width = float(np.ptp(xy[:, 0]))
    region = np.zeros(shape, np.uint8)
    cv2.fillPoly(region, [np.round(xy[topo.face_oval]).astype(np.int32)], (1,))
    inset = max(3, int(width * 0.08)) | 1
    region = np.asarray(cv2.erode(region, cv2.getStructuringElement(cv2.MORPH_ELLIPSE,
                                                                    (inset, inset))), np.uint8)
    region[: round(float(xy[topo.brows, 1].max()))] = 0
    holes = np.zeros(shape, np.uint8)
    for idx in (topo.eye_right, topo.eye_left, topo.lips):
        cv2.fillConvexPoly(holes, cv2.convexHull(np.round(xy[idx]).astype(np.int32)), (1,))
    grow = max(3, int(width * 0.06)) | 1
    holes = np.asarray(cv2.dilate(holes, cv2.getStructuringElement(cv2.MORPH_ELLIPSE,
                                                                   (grow, grow))), np.uint8)
    acc = cv2.dilate(face.accessories.astype(np.uint8), np.ones((grow, grow), np.uint8))
    return (region > 0) & (holes == 0) & (acc == 0)


def mean_colour_de2000(out_bgr: ImageBGR, target: HardFace, region: Mask) -> float:
    """CIEDE2000 between the mean Lab colour of ``region`` in the output and in the target's
    own image (same light)."""
    from skimage.color import deltaE_ciede2000

    a = lab(out_bgr, region).mean(axis=0)
    b = lab(target.face.image_bgr, region).mean(axis=0)
    return float(deltaE_ciede2000(a, b))


def local_de2000(out_bgr: ImageBGR, target: HardFace, region: Mask, cells: int = 6) -> float:
    """Mean CIEDE2000 between output and target over patches of ``region`` (a grid of
    ``cells`` x ``cells`` over the face's width and height; patches at least half covered):
    the light's shape across the face (a lamp to one side, shadows), which the mean colour
    (:func:`mean_colour_de2000`) averages away."""
    from skimage.color import deltaE_ciede2000

    xy = target.face.landmarks_xy
    x1, y1 = xy.min(axis=0)
    x2, y2 = xy.max(axis=0)
    out_lab, tgt_lab = lab(out_bgr), lab(target.face.image_bgr)
    ys = np.round(np.linspace(float(y1), float(y2), cells + 1)).astype(int)
    xs = np.round(np.linspace(float(x1), float(x2), cells + 1)).astype(int)
    des = []
    for ya, yb in pairwise(ys.tolist()):
        for xa, xb in pairwise(xs.tolist()):
            patch = region[ya:yb, xa:xb]
            if patch.size == 0 or patch.mean() < 0.5:
                continue
            a = out_lab[ya:yb, xa:xb][patch].mean(axis=0)
            b = tgt_lab[ya:yb, xa:xb][patch].mean(axis=0)
            des.append(float(deltaE_ciede2000(a, b)))
    return float(np.mean(des)) if des else 0.0


def _bins(lab_px: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    q = np.floor((lab_px + np.array([0.0, 128.0, 128.0])) / _BIN).astype(np.int64)
    return np.asarray((q[:, 0] * 64 + q[:, 1]) * 64 + q[:, 2], np.int64)


def skin_bins(face: HardFace, light: str | None = None) -> npt.NDArray[np.int64]:
    """The Lab bins of ``face``'s skin (:func:`skin_region`), relit by ``light`` without sensor
    noise when given (a source's skin under the target's light)."""
    image = face.face.image_bgr
    if light is not None:
        image = relight(image, light, face.face.landmarks_xy, noise=False)
    return np.unique(_bins(lab(image, skin_region(face))))


def skin_colours(*bins: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Sorted union of skin bins (:func:`skin_bins`), each grown by one bin each way."""
    occupied = np.unique(np.concatenate(bins))
    steps = [(d0 * 64 + d1) * 64 + d2 for d0 in (-1, 0, 1) for d1 in (-1, 0, 1)
             for d2 in (-1, 0, 1)]
    return np.unique(np.concatenate([occupied + d for d in steps]))


def foreign_share(out_bgr: ImageBGR, region: Mask, colours: npt.NDArray[np.int64]) -> float:
    """Share of ``region``'s output pixels whose colour is in neither person's skin
    (``colours``: :func:`skin_colours` of the target's skin and the relit source's)."""
    bins = _bins(lab(out_bgr, region))
    if len(bins) == 0:
        return 0.0
    return float(np.mean(~np.isin(bins, colours, assume_unique=False)))


def face_area(target: HardFace) -> Mask:
    from livecam.swap.mesh import build_topology

    xy = target.face.landmarks_xy
    mask = np.zeros(target.face.image_bgr.shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(xy[build_topology().face_oval]).astype(np.int32)], (1,))
    return mask > 0


def accessory_leak(out_with: ImageBGR, out_bare: ImageBGR, target: HardFace) -> float:
    """Share of the target's face pixels where the swap from the source with its accessories
    differs (CIE76 > 15) from the swap from the same source without them."""
    face = face_area(target) & ~target.accessories
    d = np.linalg.norm(lab(out_with, face) - lab(out_bare, face), axis=1)
    return float(np.mean(d > _LEAK_DE))


def glasses_kept(out_bgr: ImageBGR, target: HardFace) -> float | None:
    """Share of the target's own glasses-frame pixels inside its face that the output still
    shows (CIE76 <= 12 from the input); None for a target without drawn glasses."""
    frame = cv2.erode(target.glasses.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    frame &= face_area(target)
    if int(frame.sum()) < 20:
        return None
    d = np.linalg.norm(lab(out_bgr, frame) - lab(target.face.image_bgr, frame), axis=1)
    return float(np.mean(d <= _KEPT_DE))

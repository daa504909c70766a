"""5-point similarity alignment to the ArcFace templates, as insightface does it.

``estimate_similarity`` is Umeyama's least-squares similarity (rotation, uniform scale,
translation), the same estimate as ``skimage.transform.SimilarityTransform.estimate`` that
insightface's ``face_align.estimate_norm`` calls, so crops match the reference implementation.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from livecam.core.types import ImageBGR

# insightface.utils.face_align.arcface_dst: the 112x112 ArcFace template, (5, 2) px, in the
# order eye (image left), eye (image right), nose tip, mouth corner (left), mouth corner (right)
ARCFACE_112_XY = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
     [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float32)

# The FFHQ 512x512 face template (eye, eye, nose tip, mouth corner, mouth corner): facexlib's
# ``FaceRestoreHelper.face_template``, which GFPGAN, GPEN-512 and CodeFormer are aligned with.
FFHQ_512_XY = np.array(
    [[192.98138, 239.94708], [318.90277, 240.1936], [256.63416, 314.01935],
     [201.26117, 371.41043], [313.08905, 371.15118]], dtype=np.float32)

TEMPLATES = ("arcface_112", "arcface_128", "ffhq_512")


def template_xy(name: str, size_px: int) -> npt.NDArray[np.float32]:
    """The 5 template points for a ``size_px`` square crop, float32 (5, 2).

    ``arcface_112`` scales the template by size/112 (crops of 112, 224, ...); ``arcface_128``
    scales by size/128 and shifts x by 8*size/128 (inswapper's 128 crop). This mirrors
    ``estimate_norm``, which picks between the two by divisibility of the size.
    """
    if name == "arcface_112":
        return (ARCFACE_112_XY * (size_px / 112.0)).astype(np.float32)
    if name == "arcface_128":
        ratio = size_px / 128.0
        dst = ARCFACE_112_XY * ratio
        dst[:, 0] += 8.0 * ratio
        return dst.astype(np.float32)
    if name == "ffhq_512":
        return (FFHQ_512_XY * (size_px / 512.0)).astype(np.float32)
    raise ValueError(f"unknown alignment template {name!r} (known: {', '.join(TEMPLATES)})")


#: A face's cheek-to-cheek width over the distance of its eye centres (the face mesh's points
#: 234-454 over the eyes' corner midpoints, on skimage's astronaut: 2.14).
CHEEK_WIDTH_PER_EYE_DISTANCE = 2.14


def face_width_on_crop_px(template: str, size_px: int) -> float:
    """The cheek-to-cheek width, px, of a face aligned onto ``template`` in a ``size_px`` crop
    (75.4 px on inswapper's 128 px ``arcface_128`` crop): the unit of the colour blur, which
    the classic swap measures in face widths too."""
    eyes = template_xy(template, size_px)[:2]
    return CHEEK_WIDTH_PER_EYE_DISTANCE * float(np.linalg.norm(eyes[0] - eyes[1]))


def template_for_size(size_px: int) -> str:
    """The template insightface's ``estimate_norm`` uses for a crop size."""
    if size_px % 112 == 0:
        return "arcface_112"
    if size_px % 128 == 0:
        return "arcface_128"
    raise ValueError(f"crop size {size_px} is not a multiple of 112 or 128")


def estimate_similarity(src_xy: np.ndarray, dst_xy: np.ndarray) -> npt.NDArray[np.float64]:
    """The (2, 3) float64 similarity matrix mapping ``src_xy`` (K, 2) onto ``dst_xy`` (K, 2).

    Umeyama (1991), least squares; reflections are excluded as in scikit-image. The sums run in
    float32 like scikit-image does on insightface's float32 keypoints: computing them in float64
    moves the matrix by ~3e-5 and crops by a grey level here and there.
    """
    src = np.asarray(src_xy, dtype=np.float32)
    dst = np.asarray(dst_xy, dtype=np.float32)
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 2 or len(src) < 2:
        raise ValueError(f"expected two (K, 2) point sets, got {src.shape} and {dst.shape}")
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - src_mean, dst - dst_mean
    cov = dst_c.T @ src_c / len(src)
    d = np.ones(2)
    if np.linalg.det(cov) < 0:
        d[1] = -1
    u, s, vt = np.linalg.svd(cov)
    rank = np.linalg.matrix_rank(cov)
    rot = np.eye(2)
    if rank == 0:
        raise ValueError("degenerate points: all five keypoints coincide")
    if rank == 1:
        if np.linalg.det(u) * np.linalg.det(vt) > 0:
            rot = u @ vt
        else:
            flip = d[1]
            d[1] = -1
            rot = u @ np.diag(d) @ vt
            d[1] = flip
    else:
        rot = u @ np.diag(d) @ vt
    var_src = src_c.var(axis=0).sum()
    scale = (s @ d) / var_src
    matrix = np.empty((2, 3))
    matrix[:, 2] = dst_mean - scale * (rot @ src_mean)
    matrix[:, :2] = rot * scale
    return matrix


def align_matrix(kps_xy: np.ndarray, size_px: int, template: str | None = None
                 ) -> npt.NDArray[np.float64]:
    """(2, 3) matrix taking image px to the ``size_px`` crop for 5 keypoints (5, 2)."""
    return estimate_similarity(kps_xy, template_xy(template or template_for_size(size_px),
                                                   size_px))


def warp_crop(image_bgr: ImageBGR, matrix: np.ndarray, size_px: int) -> ImageBGR:
    """The aligned (size, size, 3) crop: bilinear, black outside the image (as insightface)."""
    import cv2

    warped = cv2.warpAffine(image_bgr, np.asarray(matrix, dtype=np.float64), (size_px, size_px),
                            borderValue=(0.0, 0.0, 0.0))
    return np.asarray(warped, dtype=np.uint8)

"""The tensor warp and alignment equal OpenCV's warpAffine and insightface's Umeyama on real
photos (run here on the CPU; the same code runs on CUDA)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from livecam.analysis.landmarks import five_point
from livecam.gpupipe.swap.align import FivePointFromMesh, similarity_lstsq, template_tensor
from livecam.gpupipe.swap.warp import invert_affine, warp_affine
from livecam.swap.align import align_matrix, estimate_similarity, template_xy, warp_crop

ZERO = torch.zeros(1, dtype=torch.long)


def _rotation(angle_deg: float, scale: float, centre: tuple[float, float],
              shift: tuple[float, float]) -> np.ndarray:
    m = cv2.getRotationMatrix2D(centre, angle_deg, scale)
    m[:, 2] += shift
    return m


@pytest.mark.parametrize("angle,scale", [(0.0, 1.0), (17.0, 0.61), (-40.0, 1.7), (90.0, 0.25)])
def test_warp_affine_equals_cv2(astronaut_bgr: np.ndarray, angle: float, scale: float) -> None:
    m = _rotation(angle, scale, (256.0, 200.0), (13.3, -7.7))
    ref = cv2.warpAffine(astronaut_bgr, m, (300, 260), borderValue=0.0)
    got = warp_affine(torch.from_numpy(astronaut_bgr)[None], ZERO,
                      torch.from_numpy(m)[None], 260, 300)[0].numpy()
    diff = np.abs(got - ref.astype(np.float32))
    # OpenCV's fixed-point positions are reproduced; what is left is its 15-bit weights
    assert diff.max() <= 3.0
    assert (diff > 1).mean() < 1e-3
    assert diff.mean() < 0.01


def test_warp_inverse_map_and_replicate_border(astronaut_bgr: np.ndarray) -> None:
    m = _rotation(25.0, 1.3, (100.0, 100.0), (-60.0, 40.0))
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    ref = cv2.warpAffine(astronaut_bgr, m, (400, 400), flags=flags,
                         borderMode=cv2.BORDER_REPLICATE)
    got = warp_affine(torch.from_numpy(astronaut_bgr)[None], ZERO,
                      torch.from_numpy(m)[None], 400, 400, inverse_map=True,
                      border="replicate")[0].numpy()
    diff = np.abs(got - ref.astype(np.float32))
    assert diff.max() <= 3.0 and diff.mean() < 0.01
    # a half-pixel convention error would shift everything: compare against a shifted warp
    shifted = m.copy()
    shifted[:, 2] += 0.5
    wrong = warp_affine(torch.from_numpy(astronaut_bgr)[None], ZERO,
                        torch.from_numpy(shifted)[None], 400, 400, inverse_map=True,
                        border="replicate")[0].numpy()
    assert np.abs(wrong - ref.astype(np.float32)).mean() > 10 * diff.mean()


def test_invert_affine_equals_cv2() -> None:
    rng = np.random.default_rng(3)
    mats = rng.normal(size=(6, 2, 3))
    got = invert_affine(torch.from_numpy(mats)).numpy()
    for m, g in zip(mats, got, strict=True):
        np.testing.assert_allclose(g, cv2.invertAffineTransform(m), rtol=1e-9, atol=1e-9)


def test_five_points_from_mesh_equal_cpu(astronaut_faces, t1_faces) -> None:  # type: ignore[no-untyped-def]
    for faces in (astronaut_faces, t1_faces):
        got = FivePointFromMesh()(torch.from_numpy(faces.landmarks_xy)).numpy()
        np.testing.assert_allclose(got, five_point(faces.landmarks_xy), atol=1e-3)


def test_similarity_equals_umeyama_on_real_faces(t1_faces) -> None:  # type: ignore[no-untyped-def]
    template = template_xy("arcface_128", 128)
    got = similarity_lstsq(torch.from_numpy(t1_faces.five_xy),
                           template_tensor(128, "arcface_128")).numpy()
    for five, g in zip(t1_faces.five_xy, got, strict=True):
        np.testing.assert_allclose(g, estimate_similarity(five, template), atol=2e-4, rtol=1e-4)


def test_similarity_recovers_a_known_transform() -> None:
    rng = np.random.default_rng(1)
    src = rng.uniform(0, 1000, (5, 2))
    truth = _rotation(-33.0, 0.27, (0.0, 0.0), (40.0, 91.0))
    dst = src @ truth[:, :2].T + truth[:, 2]
    got = similarity_lstsq(torch.from_numpy(src)[None], torch.from_numpy(dst)).numpy()[0]
    np.testing.assert_allclose(got, truth, atol=1e-4)


def test_aligned_crop_equals_insightface_crop(t1_faces) -> None:  # type: ignore[no-untyped-def]
    image = torch.from_numpy(t1_faces.image_bgr)[None]
    five = torch.from_numpy(t1_faces.five_xy)
    mats = similarity_lstsq(five, template_tensor(128))
    crops = warp_affine(image, torch.zeros(len(five), dtype=torch.long), mats, 128, 128).numpy()
    for k, crop in zip(t1_faces.five_xy, crops, strict=True):
        ref = warp_crop(t1_faces.image_bgr, align_matrix(k, 128), 128).astype(np.float32)
        diff = np.abs(crop - ref)
        assert diff.mean() < 0.05 and diff.max() <= 3.0

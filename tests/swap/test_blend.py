"""Feathered masks and paste-back (shared with the neural swap)."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.swap import blend


def _disc(size: int = 101, radius: int = 40) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size]
    return (((xx - size // 2) ** 2 + (yy - size // 2) ** 2) <= radius**2).astype(np.uint8) * 255


def test_feather_mask_is_zero_at_the_edge_and_one_inside() -> None:
    alpha = blend.feather_mask(_disc(), erode_px=6, blur_px=5)
    assert alpha.dtype == np.float32 and alpha.shape == (101, 101)
    assert alpha[50, 50] == pytest.approx(1.0)
    assert alpha[50, 50 + 40] == pytest.approx(0.0, abs=1e-6)  # on the original edge
    profile = alpha[50, 50:95]
    assert (np.diff(profile) <= 1e-6).all()  # falls monotonically towards the edge
    assert 0.05 < alpha[50, 50 + 34] < 0.95  # soft in between


def test_feather_mask_rejects_wrong_dtype() -> None:
    with pytest.raises(TypeError):
        blend.feather_mask(_disc().astype(np.float32), erode_px=1, blur_px=1)  # type: ignore[arg-type]


def test_paste_back_blends_only_the_box_and_leaves_the_input_alone() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    before = image.copy()
    face = np.full((20, 30, 3), 200, np.uint8)
    alpha = np.zeros((20, 30), np.float32)
    alpha[:, 15:] = 1.0
    alpha[:, 10] = 0.5
    out = blend.paste_back(image, face, alpha, (40, 10, 70, 30))
    assert (image == before).all()
    assert (out[10:30, 55:70] == 200).all()  # alpha 1: the face
    assert (out[10:30, 40:50] == image[10:30, 40:50]).all()  # alpha 0: untouched
    expected = np.round(0.5 * 200 + 0.5 * image[10:30, 50].astype(np.float32))
    assert np.abs(out[10:30, 50].astype(np.float32) - expected).max() <= 1
    out[10:30, 40:70] = image[10:30, 40:70]
    assert (out == image).all()  # nothing outside the box changed


def test_paste_back_checks_shapes() -> None:
    image = np.zeros((10, 10, 3), np.uint8)
    with pytest.raises(ValueError):
        blend.paste_back(image, np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), np.float32),
                         (0, 0, 5, 5))


def test_paste_back_affine_puts_an_aligned_crop_back_where_it_came_from() -> None:
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    import cv2

    angle = np.deg2rad(20)
    s = 1.3
    m = np.array([[s * np.cos(angle), -s * np.sin(angle), -40.0],
                  [s * np.sin(angle), s * np.cos(angle), -60.0]])
    crop = cv2.warpAffine(image, m, (64, 64), flags=cv2.INTER_LINEAR)
    painted = np.full_like(crop, 255)
    alpha = np.zeros((64, 64), np.float32)
    alpha[16:48, 16:48] = 1.0
    out = blend.paste_back_affine(image, painted, alpha, m)
    inv = cv2.invertAffineTransform(m)
    centre = inv @ np.array([32.0, 32.0, 1.0])
    cx, cy = round(centre[0]), round(centre[1])
    assert (out[cy, cx] == 255).all()
    corner = inv @ np.array([2.0, 2.0, 1.0])  # alpha 0 there: original pixel
    x, y = round(corner[0]), round(corner[1])
    assert (out[y, x] == image[y, x]).all()
    changed = np.argwhere((out != image).any(axis=2))
    expected_area = (32 / s) ** 2  # the crop is s times larger than the frame region
    assert 0.85 * expected_area < len(changed) < 1.3 * expected_area


def test_seamless_paste_changes_only_the_masked_area() -> None:
    image = np.full((80, 80, 3), 90, np.uint8)
    face = np.full((40, 40, 3), 90, np.uint8)
    face[15:25, 15:25] = 250  # a bright detail inside the mask
    mask = np.zeros((40, 40), np.uint8)
    mask[5:35, 5:35] = 255
    out = blend.seamless_paste(image, face, mask, (20, 20, 60, 60))
    assert out[40, 40].mean() > 150  # the detail came across
    assert (out[:15] == 90).all() and (out[:, :15] == 90).all()

"""Feathered masks, colour gain and both paste-backs on tensors equal their CPU twins
(``livecam.swap.blend``, ``livecam.swap.colour``, ``livecam.swap.inswapper.paste_back``) on real
photos with real MediaPipe landmarks."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from livecam.gpupipe.swap.align import similarity_lstsq, template_tensor
from livecam.gpupipe.swap.blend import (
    ellipse_kernel,
    feather_mask,
    lowfreq_gain,
    paste_back_affine_,
)
from livecam.gpupipe.swap.paste import insightface_paste_, mask_fits_window
from livecam.swap import blend, colour
from livecam.swap import inswapper as cpu_inswapper
from livecam.swap.align import align_matrix


def _face_texture(seed: int, size: int = 128) -> np.ndarray:
    """A stand-in generator output: smooth noise with strong edges (worst case for warps)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (16, 16, 3)).astype(np.uint8)
    return cv2.resize(small, (size, size), interpolation=cv2.INTER_NEAREST)


@pytest.mark.parametrize("radius", [1, 2, 5, 9, 13])
def test_ellipse_kernel_equals_opencv(radius: int) -> None:
    ref = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    np.testing.assert_array_equal(ellipse_kernel(radius), ref.astype(np.float32))


def test_feather_mask_equals_cpu(astronaut_faces) -> None:  # type: ignore[no-untyped-def]
    from livecam.swap.mesh import build_topology

    oval = build_topology().face_oval
    mask = np.zeros((200, 180), np.uint8)
    pts = astronaut_faces.landmarks_xy[0][oval] * 0.4 - np.array([20.0, 10.0])
    cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 255)
    for erode, blur in ((0.0, 0.0), (3.4, 5.0), (7.0, 4.0), (12.0, 11.0)):
        ref = blend.feather_mask(mask, erode_px=erode, blur_px=blur)
        got = feather_mask(torch.from_numpy(mask).float()[None, None] / 255.0,
                           erode_px=erode, blur_px=blur)[0, 0].numpy()
        np.testing.assert_allclose(got, ref, atol=2e-5)


def test_lowfreq_gain_equals_cpu(astronaut_bgr: np.ndarray) -> None:
    src = astronaut_bgr[100:228, 180:308]
    tgt = cv2.GaussianBlur(astronaut_bgr[130:258, 200:328], (5, 5), 0)
    weight = np.zeros((128, 128), np.float32)
    cv2.circle(weight, (64, 64), 50, 1.0, -1)
    ref = colour.lowfreq_gain(src, tgt, weight, 21.0)

    def nchw(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).float().permute(2, 0, 1)[None]

    got = lowfreq_gain(nchw(src), nchw(tgt), torch.from_numpy(weight)[None, None], 21.0)
    np.testing.assert_allclose(got[0].permute(1, 2, 0).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_feathered_paste_equals_cpu(astronaut_faces) -> None:  # type: ignore[no-untyped-def]
    image = astronaut_faces.image_bgr
    m = align_matrix(astronaut_faces.five_xy[0], 128)
    face = _face_texture(1)
    white = np.full((128, 128), 255, np.uint8)
    alpha = blend.feather_mask(white, erode_px=10.0, blur_px=9.0)
    ref = blend.paste_back_affine(image, face, alpha, m)
    frames = torch.from_numpy(image.copy())[None]
    paste_back_affine_(frames, torch.zeros(1, dtype=torch.long),
                       torch.from_numpy(face).float()[None],
                       torch.from_numpy(alpha)[None, None], torch.from_numpy(m)[None],
                       window_px=400)
    diff = np.abs(frames[0].numpy().astype(int) - ref.astype(int))
    assert (ref != image).mean() > 0.05  # the face really was pasted
    # the CPU rounds positions relative to its box, we relative to the window: at the texture's
    # hard edges that 1/32 px costs up to ~8 levels on a handful of pixels
    assert diff.mean() < 0.05 and (diff > 3).mean() < 1e-3 and diff.max() <= 8


def test_insightface_paste_equals_cpu_on_six_faces(t1_faces) -> None:  # type: ignore[no-untyped-def]
    image = t1_faces.image_bgr
    n = len(t1_faces.five_xy)
    mats = similarity_lstsq(torch.from_numpy(t1_faces.five_xy), template_tensor(128))
    faces = [_face_texture(i) for i in range(n)]
    ref = image
    for face, m in zip(faces, mats.numpy(), strict=True):
        ref = cpu_inswapper.paste_back(ref, face, m.astype(np.float64))
    frames = torch.from_numpy(image.copy())[None]
    insightface_paste_(frames, torch.zeros(n, dtype=torch.long),
                       torch.from_numpy(np.stack(faces)).float(), mats,
                       torch.ones(n, dtype=torch.bool), window_px=256)
    got = frames[0].numpy()
    diff = np.abs(got.astype(int) - ref.astype(int))
    assert (ref != image).any(axis=-1).mean() > 0.02
    assert diff.mean() < 0.05
    assert (diff > 3).mean() < 1e-3
    assert bool(mask_fits_window(mats, 128, 256).all())


def test_insightface_paste_on_a_large_rotated_face(astronaut_faces) -> None:  # type: ignore[no-untyped-def]
    """A 2x upscaled, rotated frame: kernel sizes grow with the face (k1 = 27, k2 = 13)."""
    big = cv2.resize(astronaut_faces.image_bgr, (1024, 1024), interpolation=cv2.INTER_LINEAR)
    rot = cv2.getRotationMatrix2D((512.0, 512.0), 23.0, 1.0)
    image = cv2.warpAffine(big, rot, (1024, 1024), borderMode=cv2.BORDER_REFLECT)
    five = astronaut_faces.five_xy[0] * 2.0 @ rot[:, :2].T + rot[:, 2]
    m = align_matrix(five, 128)
    face = _face_texture(9)
    ref = cpu_inswapper.paste_back(image, face, m)
    frames = torch.from_numpy(image.copy())[None]
    mats = torch.from_numpy(m)[None]
    insightface_paste_(frames, torch.zeros(1, dtype=torch.long),
                       torch.from_numpy(face).float()[None], mats,
                       torch.ones(1, dtype=torch.bool), window_px=640)
    diff = np.abs(frames[0].numpy().astype(int) - ref.astype(int))
    assert diff.mean() < 0.05 and (diff > 3).mean() < 1e-3
    assert bool(mask_fits_window(mats, 128, 640).all())
    assert not bool(mask_fits_window(mats, 128, 200).any())


def test_invalid_face_slot_leaves_frame_untouched(astronaut_faces) -> None:  # type: ignore[no-untyped-def]
    image = astronaut_faces.image_bgr
    mats = similarity_lstsq(torch.from_numpy(astronaut_faces.five_xy), template_tensor(128))
    frames = torch.from_numpy(image.copy())[None]
    insightface_paste_(frames, torch.zeros(1, dtype=torch.long),
                       torch.from_numpy(_face_texture(2)).float()[None], mats,
                       torch.zeros(1, dtype=torch.bool), window_px=300)
    np.testing.assert_array_equal(frames[0].numpy(), image)

"""Colour transfer: the target's light (also uneven side light) onto the source's detail."""

from __future__ import annotations

import numpy as np

from livecam.swap import colour


def _ramp(h: int, w: int, left: float, right: float) -> np.ndarray:
    return np.tile(np.linspace(left, right, w, dtype=np.float32), (h, 1))


def test_lowfreq_gain_moves_side_light_from_target_to_source() -> None:
    rng = np.random.default_rng(0)
    h, w = 60, 80
    detail = rng.uniform(0.8, 1.2, (h, w, 1)).astype(np.float32)  # the source's "identity"
    # source lit from its right, target lit from its left (strong side light)
    source = np.clip(150 * detail * _ramp(h, w, 0.6, 1.2)[:, :, None], 0, 255)
    source = np.repeat(source, 3, axis=2).astype(np.uint8)
    target = np.clip(np.full((h, w, 3), 140.0) * _ramp(h, w, 1.3, 0.5)[:, :, None], 0,
                     255).astype(np.uint8)
    weight = np.ones((h, w), np.float32)
    gain = colour.lowfreq_gain(source, target, weight, blur_px=12)
    out = source.astype(np.float32) * gain
    left, right = out[:, :20].mean(), out[:, -20:].mean()
    t_left, t_right = target[:, :20].mean(), target[:, -20:].mean()
    assert left > 1.6 * right  # lit like the target now, not like the source
    assert abs(left / right - t_left / t_right) < 0.35 * (t_left / t_right)
    # fine detail survives: the high-pass of the result correlates with the source's detail
    hp = out[:, :, 0] / np.maximum(gain[:, :, 0] * 150 * _ramp(h, w, 0.6, 1.2), 1)
    assert np.corrcoef(hp.ravel(), detail.ravel())[0, 1] > 0.9


def test_meanstd_only_matches_global_statistics() -> None:
    h, w = 40, 40
    source = np.full((h, w, 3), 100, np.uint8)
    target = np.full((h, w, 3), 180, np.uint8)
    weight = np.ones((h, w), np.float32)
    scale, offset = colour.meanstd_transfer(source, target, weight)
    out = colour.apply_lab_affine(source, scale, offset)
    assert abs(float(out.mean()) - 180) < 3


def test_lowfreq_gain_is_one_where_no_weight_reaches() -> None:
    source = np.full((30, 90, 3), 100, np.uint8)
    target = np.full((30, 90, 3), 200, np.uint8)
    weight = np.zeros((30, 90), np.float32)
    weight[:, :10] = 1.0
    gain = colour.lowfreq_gain(source, target, weight, blur_px=5)
    assert np.allclose(gain[:, :5], 2.0, atol=0.05)
    assert np.allclose(gain[:, -5:], 1.0, atol=1e-3)

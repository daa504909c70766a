"""Colour transfer: the target's light (also uneven side light) onto the source's detail."""

from __future__ import annotations

import cv2
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


def test_lab_transfer_moves_light_and_keeps_detail_contrast() -> None:
    """A dark, saturated source on a bright, pale target: the result has the target's light
    (also its side light) and colour, the source's detail at its own contrast (a gain would
    double it) and a colour spread shrunk towards the target's."""
    rng = np.random.default_rng(0)
    h, w = 60, 80
    detail = rng.normal(0, 6, (h, w)).astype(np.float32)  # the source's "identity", L units
    src_lab = np.empty((h, w, 3), np.float32)
    src_lab[..., 0] = 120 + detail
    src_lab[..., 1] = 150 + rng.normal(0, 8, (h, w))  # orange and blotchy
    src_lab[..., 2] = 165 + rng.normal(0, 8, (h, w))
    tgt_lab = np.empty((h, w, 3), np.float32)
    tgt_lab[..., 0] = _ramp(h, w, 230, 170)  # bright, lit from the left
    tgt_lab[..., 1] = 135 + rng.normal(0, 2, (h, w))  # pale
    tgt_lab[..., 2] = 140 + rng.normal(0, 2, (h, w))
    weight = np.ones((h, w), np.float32)
    match = colour.lab_transfer(src_lab, tgt_lab, weight, blur_px=12, edge_blur_px=4,
                                edge_weight=np.zeros((h, w), np.float32))
    out = match.map_lab(src_lab)
    left, right = out[:, :20, 0].mean(), out[:, -20:, 0].mean()
    assert left - right > 35  # the target's side light (60 across)
    assert abs(out[..., 0].mean() - tgt_lab[..., 0].mean()) < 3
    assert abs(out[..., 1:].mean(axis=(0, 1)) - tgt_lab[..., 1:].mean(axis=(0, 1))).max() < 2
    # detail at (about) its own contrast, colour spread near the target's
    hp = out[..., 0] - np.asarray(cv2.blur(out[..., 0], (9, 9)))
    assert np.corrcoef(hp.ravel(), detail.ravel())[0, 1] > 0.85
    assert 0.75 < hp.std() / (detail - cv2.blur(detail, (9, 9))).std() < 1.3
    assert out[..., 1].std() < 0.6 * src_lab[..., 1].std()


def test_lab_transfer_matches_locally_at_the_edge() -> None:
    """Near the mask's edge the small blur is used: a target forehead brightening towards the
    top is met there, not averaged away by the broad mean (no band)."""
    h, w = 60, 60
    src_lab = np.full((h, w, 3), 128, np.float32)
    tgt_lab = np.full((h, w, 3), 128, np.float32)
    rows = np.arange(h, dtype=np.float32)[:, None]
    tgt_lab[..., 0] = 128 + 40 * np.clip((20 - rows) / 20, 0, 1)  # +40 at the top edge
    weight = np.ones((h, w), np.float32)
    edge = np.zeros((h, w), np.float32)
    edge[:12] = 1.0
    out = colour.lab_transfer(src_lab, tgt_lab, weight, blur_px=40, edge_blur_px=4,
                              edge_weight=edge).map_lab(src_lab)
    broad_out = colour.lab_transfer(src_lab, tgt_lab, weight, blur_px=40, edge_blur_px=4,
                                    edge_weight=np.zeros((h, w), np.float32)).map_lab(src_lab)
    want = tgt_lab[:8, :, 0].mean()
    assert abs(out[:8, :, 0].mean() - want) < 8
    assert abs(broad_out[:8, :, 0].mean() - want) > 2 * abs(out[:8, :, 0].mean() - want) + 8


def test_lab_transfer_ignores_the_live_faces_hair_under_the_mask() -> None:
    """Dark hair over the top of the live face, inside the mask: the swapped skin next to it
    keeps the live skin's brightness instead of being darkened towards the hair."""
    h, w = 60, 60
    src_lab = np.full((h, w, 3), 128, np.float32)
    tgt_lab = np.full((h, w, 3), 128, np.float32)
    tgt_lab[..., 0] = 170
    tgt_lab[:8, :, 0] = 40  # a fringe, inside the mask
    skin = colour.skin_weight(tgt_lab, np.ones((h, w), np.float32))
    assert (skin[:8] == 0).all() and (skin[8:] == 1).all()
    edge = np.zeros((h, w), np.float32)
    edge[:15] = 1.0
    out = colour.lab_transfer(src_lab, tgt_lab, np.ones((h, w), np.float32),
                              blur_px=40, edge_blur_px=6, edge_weight=edge).map_lab(src_lab)
    assert abs(out[8:15, :, 0].mean() - 170) < 5


def _skin_weight_by_numpy(lab: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """skin_weight's definition with np.median and whole-image arithmetic (the reference)."""
    pixels = lab[weight > 0.5]
    centre = np.median(pixels, axis=0)
    spread = np.maximum(np.median(np.abs(pixels - centre), axis=0) * 1.4826,
                        colour._SKIN_SPREAD_FLOOR)
    d = (lab - centre) / spread * colour._SKIN_AXIS_WEIGHT
    far = np.sqrt((d * d).sum(axis=2)) > colour._SKIN_FAR
    return np.where(far, 0.0, weight).astype(np.float32)


def test_skin_weight_from_histograms_is_numpys() -> None:
    """Whole 8-bit levels take the histogram medians and the table of levels: the same
    weights, bit for bit, as np.median and the arithmetic per pixel (odd and even counts,
    narrow and wide spreads); other values take numpy's path."""
    rng = np.random.default_rng(3)
    for trial in range(60):
        h, w = (int(v) for v in rng.integers(8, 70, 2))
        lab = rng.integers(0, 256, (h, w, 3)).astype(np.float32)
        if trial % 2:
            lab[..., 1:] = np.clip(np.round(128 + rng.normal(0, 4, (h, w, 2))), 0, 255)
        if trial % 3 == 0:
            lab += 0.25  # not whole levels
        weight = (rng.random((h, w)) < rng.uniform(0.2, 1.0)).astype(np.float32)
        if int((weight > 0.5).sum()) < 16:
            continue
        want = _skin_weight_by_numpy(lab, weight)
        assert np.array_equal(colour.skin_weight(lab, weight), want), trial


def test_applying_the_match_is_the_lab_arithmetic_per_pixel() -> None:
    """apply_lab_transfer (its ceiling and highlight band on separate planes) gives what the
    match's arithmetic on the whole Lab image gives, rounded."""
    rng = np.random.default_rng(5)
    h, w = 40, 50
    image = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    src_lab = np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2LAB), np.float32)
    tgt_lab = src_lab.copy()
    tgt_lab[..., 0] = np.clip(tgt_lab[..., 0] * 1.2 + 20, 0, 255)
    tgt_lab[..., 1] += 6
    match = colour.lab_transfer(src_lab, tgt_lab, np.ones((h, w), np.float32), blur_px=12,
                                edge_blur_px=4, edge_weight=np.zeros((h, w), np.float32))
    assert match.top is not None
    lab = np.asarray(cv2.transform(src_lab, match.matrix), np.float32) + match.bias
    lightness = lab[..., 0]
    touched = (lightness > match.l_max - colour._CEILING_KNEE) | (lightness < match.l_min)
    capped = colour.soft_ceiling(lightness[touched], match.l_max)
    shift = (np.maximum(capped, match.l_min) - lightness[touched])[:, None] * match.chroma_per_l
    lab[touched, 1:] += shift
    lightness[touched] = capped
    band = match.top
    at = np.clip(lightness, band.l_start, band.l_end)
    below = np.clip((band.l_start - lightness) / 12.0, 0.0, 1.0) ** 2 * 255.0
    for ch in (0, 1):
        centre = band.centre[ch] + (at - band.l_start) * band.per_l[ch]
        half = below + band.half_width[ch]
        lab[..., 1 + ch] = np.clip(lab[..., 1 + ch], centre - half, centre + half)
    want = cv2.cvtColor(np.clip(np.round(lab), 0, 255).astype(np.uint8), cv2.COLOR_LAB2BGR)
    got = colour.apply_lab_transfer(image, match)
    # the reference rounds its own way (float64 steps, numpy's rounding): a level at most
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert float(np.mean(got != want)) < 0.01


def _local_mean_by_numpy(image: np.ndarray, weight: np.ndarray, ksize: int,
                         fallback: np.ndarray) -> np.ndarray:
    size = (ksize | 1, ksize | 1)
    num, den = image * weight[:, :, None], weight
    for _ in range(2):
        num = cv2.blur(num, size, borderType=cv2.BORDER_REPLICATE).reshape(image.shape)
        den = cv2.blur(den, size, borderType=cv2.BORDER_REPLICATE)
    return (num + 1e-3 * fallback) / (den[:, :, None] + 1e-3)


def _lab_transfer_by_numpy(src: np.ndarray, tgt: np.ndarray, weight: np.ndarray,
                           blur_px: float, edge_blur_px: float,
                           edge_weight: np.ndarray) -> tuple[np.ndarray, ...]:
    """lab_transfer's statistics with numpy's own indexing, axis-0 statistics and
    broadcasting (the reference): its matrix, bias, ceiling and highlight band."""
    w_src, w_tgt = colour.skin_weight(src, weight), colour.skin_weight(tgt, weight)
    sel_src, sel_tgt = w_src > 0.5, w_tgt > 0.5
    skin_src, skin_tgt = src[sel_src], tgt[sel_tgt]
    g_src, g_tgt = skin_src.mean(axis=0), skin_tgt.mean(axis=0)
    (src_broad, tgt_broad), (src_edge, tgt_edge) = [
        (_local_mean_by_numpy(src, w_src, max(3, round(b)), g_src),
         _local_mean_by_numpy(tgt, w_tgt, max(3, round(b)), g_tgt))
        for b in (blur_px, edge_blur_px)]
    dev_src, dev_tgt = skin_src - src_broad[sel_src], skin_tgt - tgt_broad[sel_tgt]

    def slopes_of(dev: np.ndarray) -> np.ndarray:
        d_l = dev[:, 0] - dev[:, 0].mean()
        var = float(np.dot(d_l, d_l))
        if var < 1e-3 * len(d_l) + 1e-6:
            return np.zeros(2, np.float32)
        slopes = (d_l @ (dev[:, 1:] - dev[:, 1:].mean(axis=0))) / var
        return np.clip(slopes, 0.0, colour._LOCUS_SLOPE_MAX).astype(np.float32)

    slopes_src, chroma_per_l = slopes_of(dev_src), slopes_of(dev_tgt)
    dev_src[:, 1:] -= dev_src[:, :1] * slopes_src
    dev_tgt[:, 1:] -= dev_tgt[:, :1] * chroma_per_l
    scale = np.clip((dev_tgt.std(axis=0) + 1.0) / (dev_src.std(axis=0) + 1.0),
                    colour._SCALE_MIN, colour._SCALE_MAX)
    matrix = np.diag(scale).astype(np.float32)
    matrix[1:, 0] = chroma_per_l * scale[0] - slopes_src * scale[1:]
    l_min, l_max = (float(v) for v in np.percentile(skin_tgt[:, 0], (1.0, 99.0)))
    l_start = float(np.percentile(skin_tgt[:, 0], 75.0))
    top = skin_tgt[skin_tgt[:, 0] >= l_start]
    d_l = top[:, 0] - top[:, 0].mean()
    var = float(np.dot(d_l, d_l))
    chroma = top[:, 1:] - top[:, 1:].mean(axis=0)
    per_l = (np.zeros(2, np.float32) if var < 1e-3 * len(d_l) + 1e-6
             else np.clip((d_l @ chroma) / var, -2.0, 2.0))
    half = np.maximum((chroma - d_l[:, None] * per_l).std(axis=0) * 3.0, 3.0)
    centre = top[:, 1:].mean(axis=0) + (l_start - top[:, 0].mean()) * per_l
    l_max += colour._CEILING_MARGIN * min(1.0, l_max / colour._CEILING_MARGIN_FULL_L)
    w = edge_weight[:, :, None]
    src_mean = src_broad * (1.0 - w) + src_edge * w
    tgt_mean = tgt_broad * (1.0 - w) + tgt_edge * w
    bias = tgt_mean - np.stack([src_mean[..., 0] * matrix[i, 0] + src_mean[..., 1] * matrix[i, 1]
                                + src_mean[..., 2] * matrix[i, 2] for i in range(3)], axis=2)
    return (matrix, bias.astype(np.float32), np.float64(l_max), np.float64(l_min), chroma_per_l,
            np.float64(l_start), centre.astype(np.float32), per_l.astype(np.float32),
            half.astype(np.float32))


def test_lab_transfer_is_numpys_arithmetic() -> None:
    """The colour statistics gathered with np.compress, their axis-0 means and spreads as
    running sums, the blends channel by channel: numpy's values bit for bit (whole levels and
    not, spread and narrow skin, the edge scale here and there)."""
    rng = np.random.default_rng(11)
    for trial in range(40):
        h, w = (int(v) for v in rng.integers(20, 100, 2))
        src = rng.normal((150, 140, 135), rng.uniform(2, 30, 3), (h, w, 3)).astype(np.float32)
        tgt = rng.normal((170, 150, 140), rng.uniform(2, 30, 3), (h, w, 3)).astype(np.float32)
        if trial % 3:
            src, tgt = np.clip(np.round(src), 0, 255), np.clip(np.round(tgt), 0, 255)
        weight = (rng.random((h, w)) < rng.uniform(0.3, 1.0)).astype(np.float32)
        edge = np.clip(rng.normal(0.3, 0.5, (h, w)), 0, 1).astype(np.float32)
        blur, edge_blur = float(rng.uniform(3, 80)), float(rng.uniform(3, 12))
        match = colour.lab_transfer(src, tgt, weight, blur_px=blur, edge_blur_px=edge_blur,
                                    edge_weight=edge)
        assert match.top is not None
        got = (match.matrix, match.bias, np.float64(match.l_max), np.float64(match.l_min),
               match.chroma_per_l, np.float64(match.top.l_start), match.top.centre,
               match.top.per_l, match.top.half_width)
        want = _lab_transfer_by_numpy(src, tgt, weight, blur, edge_blur, edge)
        names = ("matrix", "bias", "l_max", "l_min", "chroma", "l_start", "centre", "per_l",
                 "half")
        for name, a, b in zip(names, got, want, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), (trial, name)

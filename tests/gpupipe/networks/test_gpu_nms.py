"""Batched weighted NMS against a line-by-line numpy port of MediaPipe's loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from livecam.gpupipe.networks.nms import nms_leaders, weighted_nms


def _mediapipe_weighted_nms(boxes: np.ndarray, points: np.ndarray, scores: np.ndarray,
                            threshold: float) -> list[tuple[float, np.ndarray]]:
    """NonMaxSuppressionCalculator::WeightedNonMaxSuppression, as plain loops."""
    def iou(a: np.ndarray, b: np.ndarray) -> float:
        ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = ix * iy
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
        return inter / union if union > 0 else 0.0

    remaining = list(np.argsort(-scores, kind="stable"))
    out = []
    while remaining:
        lead = remaining[0]
        cluster = [i for i in remaining if iou(boxes[i], boxes[lead]) > threshold]
        remaining = [i for i in remaining if i not in cluster]
        w = scores[cluster]
        merged = (np.concatenate([boxes[cluster], points[cluster]], 1) * w[:, None]).sum(0)
        out.append((float(scores[lead]), merged / w.sum()))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_matches_mediapipe_loop_on_random_clusters(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Clusters of jittered boxes, like anchors lighting up around a few faces.
    centres = rng.uniform(0.2, 0.8, size=(4, 2))
    rows = []
    for c in centres:
        for _ in range(rng.integers(3, 12)):
            xy = c + rng.normal(0, 0.03, 2)
            size = rng.uniform(0.1, 0.25)
            rows.append([xy[0] - size / 2, xy[1] - size / 2, xy[0] + size / 2, xy[1] + size / 2])
    boxes = np.asarray(rows, np.float32)
    points = rng.uniform(0, 1, (len(boxes), 12)).astype(np.float32)
    scores = rng.uniform(0.5, 1.0, len(boxes)).astype(np.float32)
    expected = _mediapipe_weighted_nms(boxes, points, scores, 0.3)
    out_boxes, out_points, out_scores, out_valid = weighted_nms(
        torch.from_numpy(boxes)[None], torch.from_numpy(points)[None],
        torch.from_numpy(scores)[None], torch.ones(1, len(boxes), dtype=torch.bool),
        max_out=16, max_candidates=64, iou_threshold=0.3, iterations=16)
    assert int(out_valid.sum()) == len(expected)
    for j, (score, merged) in enumerate(expected):
        assert float(out_scores[0, j]) == pytest.approx(score)
        got = torch.cat((out_boxes[0, j], out_points[0, j])).numpy()
        assert np.allclose(got, merged, atol=1e-5)
    assert not out_valid[0, len(expected):].any()


def test_reports_when_iterations_are_too_few() -> None:
    # A chain: each box overlaps only its neighbours, so the answer alternates down the chain.
    xs = np.arange(8, dtype=np.float32) * 0.5
    boxes = torch.from_numpy(np.stack([xs, xs * 0, xs + 1.0, xs * 0 + 1], 1))[None]
    scores = torch.linspace(1.0, 0.6, 8)[None]
    valid = torch.ones(1, 8, dtype=torch.bool)
    extras = torch.zeros(1, 8, 0)
    kwargs = {"max_candidates": 8, "iou_threshold": 0.3}
    assert not bool(nms_leaders(boxes, extras, scores, valid, iterations=2, **kwargs)[5][0])
    leaders, *_, converged = nms_leaders(boxes, extras, scores, valid, iterations=8, **kwargs)
    assert bool(converged[0])
    assert leaders[0].tolist() == [True, False, True, False, True, False, True, False]

"""MediaPipe's weighted non-max suppression, batched and with static shapes.

MediaPipe (``NonMaxSuppressionCalculator``, algorithm WEIGHTED) walks detections by falling
score: the first remaining one leads a cluster of every remaining detection whose IoU with it
exceeds the threshold (itself included); the cluster's box and keypoints are the
score-weighted mean of its members, its score the leader's; members leave the list.

Equivalently: detection i leads iff no earlier leader overlaps it, and it belongs to the first
leader that overlaps it. The leader set is the fixed point of
``lead = valid & ~any_{j<i}(lead[j] & overlap[j, i])``. Iterating that map from ``lead = valid``
reaches the greedy answer after at most (longest alternating overlap chain) steps; a face's
anchors form a near-clique, which settles in two. We iterate a fixed number of times (no
data-dependent control flow, so CUDA graphs can capture it) and report whether the result is a
fixed point, so callers can tell when ``iterations`` was too small.
"""

from __future__ import annotations

import torch


def box_iou_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU (B, K, K) of (B, K, 4) xyxy boxes; 0 where boxes do not intersect."""
    x0, y0, x1, y1 = boxes.unbind(-1)
    area = (x1 - x0) * (y1 - y0)
    ix = (torch.minimum(x1[:, :, None], x1[:, None, :])
          - torch.maximum(x0[:, :, None], x0[:, None, :])).clamp(min=0)
    iy = (torch.minimum(y1[:, :, None], y1[:, None, :])
          - torch.maximum(y0[:, :, None], y0[:, None, :])).clamp(min=0)
    inter = ix * iy
    union = area[:, :, None] + area[:, None, :] - inter
    return torch.where(union > 0, inter / union.clamp(min=1e-12), torch.zeros_like(inter))


def weighted_nms(boxes_xyxy: torch.Tensor, extras: torch.Tensor, scores: torch.Tensor,
                 valid: torch.Tensor, *, max_out: int, max_candidates: int,
                 iou_threshold: float, iterations: int
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weighted NMS over (B, N) detections; returns ``max_out`` slots per batch item.

    ``boxes_xyxy`` (B, N, 4), ``extras`` (B, N, E) (keypoints, averaged like the box),
    ``scores`` (B, N), ``valid`` (B, N) bool (score above threshold, non-negative size). Only
    the ``max_candidates`` best-scoring detections take part. Returns boxes (B, max_out, 4),
    extras (B, max_out, E), scores (B, max_out), valid (B, max_out), best first, in float32.
    Whether the fixed point was reached is available from :func:`nms_leaders`.
    """
    leaders, member, cand_boxes, cand_extras, cand_scores = nms_leaders(
        boxes_xyxy, extras, scores, valid, max_candidates=max_candidates,
        iou_threshold=iou_threshold, iterations=iterations)[:5]
    weights = member.float() * cand_scores[:, None, :]  # (B, leader, member)
    total = weights.sum(-1, keepdim=True).clamp(min=1e-12)
    merged = torch.bmm(weights, torch.cat((cand_boxes, cand_extras), dim=-1)) / total
    k = cand_scores.shape[1]
    # Leaders are already in score order; take the first max_out of them.
    order_key = leaders.float() * (k - torch.arange(k, device=scores.device, dtype=torch.float32))
    take = min(max_out, k)
    _, slot = torch.topk(order_key, take, dim=1, sorted=True)
    out_valid = torch.gather(leaders, 1, slot)
    out = torch.gather(merged, 1, slot[..., None].expand(-1, -1, merged.shape[-1]))
    out_scores = torch.gather(cand_scores, 1, slot) * out_valid.float()
    out = out * out_valid[..., None].float()
    if take < max_out:  # fewer candidates than slots: pad with empty slots
        pad = max_out - take
        out = torch.nn.functional.pad(out, (0, 0, 0, pad))
        out_scores = torch.nn.functional.pad(out_scores, (0, pad))
        out_valid = torch.nn.functional.pad(out_valid, (0, pad))
    return out[..., :4], out[..., 4:], out_scores, out_valid


def nms_leaders(boxes_xyxy: torch.Tensor, extras: torch.Tensor, scores: torch.Tensor,
                valid: torch.Tensor, *, max_candidates: int, iou_threshold: float,
                iterations: int) -> tuple[torch.Tensor, ...]:
    """The cluster structure behind :func:`weighted_nms`.

    Returns ``(leaders (B, K) bool, member (B, K, K) bool [leader, detection], boxes (B, K, 4),
    extras (B, K, E), scores (B, K), converged (B,) bool)`` for the K best candidates sorted by
    score; ``converged`` is False where ``iterations`` did not reach the fixed point.
    """
    k = min(max_candidates, scores.shape[1])
    masked = torch.where(valid, scores.float(), torch.full_like(scores, -1.0, dtype=torch.float32))
    cand_scores, idx = torch.topk(masked, k, dim=1, sorted=True)
    cand_valid = cand_scores >= 0
    cand_scores = cand_scores.clamp(min=0)
    cand_boxes = torch.gather(boxes_xyxy.float(), 1, idx[..., None].expand(-1, -1, 4))
    cand_extras = torch.gather(extras.float(), 1, idx[..., None].expand(-1, -1, extras.shape[-1]))
    overlap = (box_iou_xyxy(cand_boxes) > iou_threshold) & cand_valid[:, :, None] & cand_valid[
        :, None, :]
    earlier = torch.ones(k, k, dtype=torch.bool, device=scores.device).triu(1)  # [j, i]: j < i
    suppressors = (overlap & earlier).float()
    valid_row = cand_valid.float()[:, None, :]  # (B, 1, K)

    def step(lead_row: torch.Tensor) -> torch.Tensor:
        # valid and hit by no leader: valid - (leaders overlapping it), at least 1 exactly
        # then (the counts are small whole numbers, exact in float32); two kernels a step
        return torch.baddbmm(valid_row, lead_row, suppressors, alpha=-1.0).clamp_(min=0.0)

    lead_row = valid_row
    for _ in range(iterations):
        lead_row = step(lead_row)
    converged = (step(lead_row) == lead_row).all(dim=2)[:, 0]
    lead = lead_row[:, 0, :] > 0.5
    owner_overlap = lead[:, :, None] & overlap  # [leader j, detection i]
    first = torch.cumsum(owner_overlap.int(), dim=1) == 1
    member = owner_overlap & first
    return lead, member, cand_boxes, cand_extras, cand_scores, converged

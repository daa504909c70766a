"""Boxes x1 y1 x2 y2 px as Python floats: the few-box arithmetic of the tracker and the face
follower.

On a face or a few, plain floats cost less than numpy's fixed cost per call, and they never
let numpy go of the GIL (the follower keeps it: ``livecam.analysis.keepgil``). A numpy box is
passed as ``box.tolist()`` (float32 to float64 exactly, as a cast would).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two boxes: ``livecam.track.bytetrack.iou_matrix_numpy``'s float64 operations in
    its order, so the same bits (a box with a NaN has a NaN area, so the union is NaN and both
    give 0)."""
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    inter = (max(min(ax2, bx2) - max(ax1, bx1), 0.0)
             * max(min(ay2, by2) - max(ay1, by1), 0.0))
    area_a = max(ax2 - ax1, 0.0) * max(ay2 - ay1, 0.0)
    area_b = max(bx2 - bx1, 0.0) * max(by2 - by1, 0.0)
    union = area_a + area_b - inter
    return inter / max(union, 1e-12) if union > 0 else 0.0


def share_in(box: Sequence[float], region: Sequence[float]) -> float:
    """The share of ``box``'s area inside ``region`` (0-1; a box of no area counts as 1e-6
    px²)."""
    iw = min(box[2], region[2]) - max(box[0], region[0])
    ih = min(box[3], region[3]) - max(box[1], region[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    return iw * ih / max((box[2] - box[0]) * (box[3] - box[1]), 1e-6)


def share_in_frame(box: Sequence[float], w: float, h: float) -> float:
    """The share of ``box``'s area inside a frame ``w`` x ``h`` px (exactly 1.0 for a box
    wholly inside)."""
    return share_in(box, (0.0, 0.0, w, h))


def meet(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether two boxes overlap by more than an edge."""
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def meets_any(box: Sequence[float], boxes: Iterable[Sequence[float]]) -> bool:
    """Whether ``box`` overlaps one of ``boxes`` by more than an edge (:func:`meet`; no
    boxes: False)."""
    return any(meet(box, other) for other in boxes)

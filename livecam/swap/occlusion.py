"""Hands in front of the face: where a hand overlaps a swapped (or covered) face, the hand's
own pixels stay in the picture.

:class:`HandsInFront` runs after the swap stage (CPU or GPU pipeline). It finds hands in the
captured frame (:class:`livecam.analysis.hands.HandLandmarker`), draws each hand's region from
its 21 landmarks (:func:`hand_alpha`) and lays the captured pixels back over the output there.
Outside faces the output is the captured frame anyway, so this is the same as cutting the hand
out of every swap and cover mask, whichever swap made them.

The region is the palm polygon and one capsule per finger bone, as wide as the knuckles are
apart, with a soft edge: the swapped face still shows between spread fingers. It is an estimate
of the hand's outline from its skeleton, not a segmentation: a little of the live face around
the fingers may show (``hand_width`` trades that against swap pixels painted over the fingers).
A false hand over a face would show that part of the real face: ``advanced.swap.hand_min_score``
sets how sure MediaPipe must be. Only the pipeline thread calls ``process``.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis.hands import FINGERS, PALM, WRIST, HandLandmarker, Hands
from livecam.config.swap import SwapConfig
from livecam.core.stage import StageBase
from livecam.core.types import ImageBGR, Packet

#: Supersampling of the drawn region (cv2's fixed-point shift): quarter-pixel outlines.
_SHIFT = 2


@dataclass(frozen=True)
class HandShape:
    """How a hand's region is drawn from its landmarks, in units of the knuckle spacing (the
    mean distance between neighbouring finger bases, 5-9-13-17): ``width`` the finger
    thickness, ``tip`` how far past the fingertip landmark the finger goes on, ``feather``
    the soft edge."""

    width: float = 1.0
    tip: float = 0.35
    feather: float = 0.15


def knuckle_spacing_px(landmarks_xy: np.ndarray) -> float:
    """Mean distance between neighbouring finger bases of one hand (21, 2), px."""
    bases = landmarks_xy[[5, 9, 13, 17]]
    return float(np.linalg.norm(np.diff(bases, axis=0), axis=1).mean())


def hand_alpha(hands: Hands, shape_hw: tuple[int, int], *,
               shape: HandShape = HandShape()) -> npt.NDArray[np.float32]:
    """(H, W) float32 in [0, 1]: 1 on the hands' regions, a soft edge around them, 0 elsewhere
    (see :func:`hand_alpha_box`)."""
    alpha = np.zeros(shape_hw, np.float32)
    box = hand_alpha_box(hands, shape_hw, shape=shape)
    if box is not None:
        y0, x0, region = box
        alpha[y0:y0 + region.shape[0], x0:x0 + region.shape[1]] = region
    return alpha


def hand_alpha_box(hands: Hands, shape_hw: tuple[int, int], *, shape: HandShape = HandShape()
                   ) -> tuple[int, int, npt.NDArray[np.float32]] | None:
    """The hands' alpha on the smallest box holding them: (y0, x0, (h, w) float32), or None.

    Each hand: the palm polygon (wrist and finger bases) filled, and each finger's chain from
    its base (the thumb's from the wrist) to a little past its tip drawn ``width`` knuckle
    spacings thick; then blurred over ``feather`` spacings. Only that box is drawn and blurred
    (a 1080p frame is never touched whole).
    """
    h, w = shape_hw
    boxes, spacings = [], []
    for points in hands.landmarks_xy:
        spacing = knuckle_spacing_px(points)
        if not np.isfinite(spacing) or spacing < 1.0:
            continue
        pad = (shape.width + 3 * shape.feather + shape.tip) * spacing + 2
        box = (max(int(points[:, 0].min() - pad), 0), max(int(points[:, 1].min() - pad), 0),
               min(int(points[:, 0].max() + pad) + 1, w),
               min(int(points[:, 1].max() + pad) + 1, h))
        if box[2] > box[0] and box[3] > box[1]:
            boxes.append((points, box))
            spacings.append(spacing)
    if not boxes:
        return None
    x0 = min(b[0] for _, b in boxes)
    y0 = min(b[1] for _, b in boxes)
    x1 = max(b[2] for _, b in boxes)
    y1 = max(b[3] for _, b in boxes)
    alpha = np.zeros((y1 - y0, x1 - x0), np.float32)
    one = 1 << _SHIFT
    for (points, (bx0, by0, bx1, by1)), spacing in zip(boxes, spacings, strict=True):
        thick = max(1, round(shape.width * spacing))
        local = (points - (bx0, by0)) * one
        roi = np.zeros((by1 - by0, bx1 - bx0), np.uint8)
        cv2.fillPoly(roi, [np.round(local[list(PALM)]).astype(np.int32)], (255,), cv2.LINE_AA,
                     _SHIFT)
        for finger in FINGERS:
            chain = local[[WRIST, *finger] if finger[0] == 1 else list(finger)]
            direction = chain[-1] - chain[-2]
            norm = float(np.linalg.norm(direction))
            if norm > 0:
                chain = np.vstack([chain, chain[-1] + direction / norm * shape.tip * spacing
                                   * one])
            cv2.polylines(roi, [np.round(chain).astype(np.int32)], False, (255,), thick,
                          cv2.LINE_AA, _SHIFT)
        region = roi.astype(np.float32) * np.float32(1 / 255)
        feather = shape.feather * spacing
        if feather > 0.5:
            k = 2 * int(np.ceil(2 * feather)) + 1
            region = np.asarray(cv2.GaussianBlur(region, (k, k), feather), np.float32)
        view = alpha[by0 - y0:by1 - y0, bx0 - x0:bx1 - x0]
        np.maximum(view, region, out=view)
    return y0, x0, alpha


class HandsInFront(StageBase):
    """Keeps detected hands in front of swapped and covered faces (see the module docstring).

    ``landmarker`` finds the hands; ``shape`` sets how their regions are drawn. Hands are
    looked for only on frames where an earlier stage changed the picture (a face was swapped
    or covered): elsewhere there is nothing to keep in front. While no hand is followed, only
    every ``search_every_n_frames``-th such frame is searched (palm detection is most of the
    cost); a followed hand is tracked on every frame.
    """

    name = "hands"

    def __init__(self, landmarker: HandLandmarker, *, shape: HandShape = HandShape(),
                 search_every_n_frames: int = 1) -> None:
        self.landmarker = landmarker
        self.shape = shape
        self.search_every_n_frames = max(1, search_every_n_frames)
        self.last_hands = Hands()
        self._since_search = self.search_every_n_frames  # the first swapped frame is searched

    @classmethod
    def from_config(cls, swap: SwapConfig) -> HandsInFront:
        return cls(HandLandmarker(max_hands=swap.hand_max_hands,
                                  min_score=swap.hand_min_score),
                   search_every_n_frames=swap.hand_search_every_n_frames)

    def open(self) -> None:
        self.landmarker.open()

    def close(self) -> None:
        self.landmarker.close()

    def process(self, packet: Packet) -> Packet:
        captured = packet.frame.image_bgr
        if packet.image_bgr is captured or packet.image_bgr.shape != captured.shape:
            return packet
        hands = self.find(captured)
        if len(hands) == 0:
            return packet
        return packet.with_fields(image_bgr=keep_in_front(packet.image_bgr, captured, hands,
                                                          shape=self.shape))

    def find(self, captured_bgr: ImageBGR) -> Hands:
        """The hands to keep in front on a captured frame whose picture a swap or cover
        changes: found (or followed) there, or none while the search waits its turn (see the
        class docstring). The GPU pipeline calls it before the swap; the pipeline thread."""
        if len(self.last_hands) == 0:
            self._since_search += 1
            if self._since_search < self.search_every_n_frames:
                return Hands()
        self._since_search = 0
        self.last_hands = self.landmarker.detect(captured_bgr)
        return self.last_hands


def keep_in_front(output_bgr: ImageBGR, captured_bgr: ImageBGR, hands: Hands, *,
                  shape: HandShape = HandShape()) -> ImageBGR:
    """``output_bgr`` with ``captured_bgr``'s pixels laid over it on the hands' regions; a new
    image (the inputs are not modified)."""
    out = output_bgr.copy()
    h, w = output_bgr.shape[:2]
    box = hand_alpha_box(hands, (h, w), shape=shape)
    if box is None:
        return out
    y0, x0, alpha = box
    y1, x1 = y0 + alpha.shape[0], x0 + alpha.shape[1]
    a = alpha[:, :, None]
    mixed = a * captured_bgr[y0:y1, x0:x1] + (1.0 - a) * output_bgr[y0:y1, x0:x1]
    out[y0:y1, x0:x1] = np.round(mixed).astype(np.uint8)
    return out

"""Hands: MediaPipe's palm detection and 21-point hand landmarks, frame after frame.

Runs ``mp.solutions.hands`` (mediapipe 0.10.21 ships ``palm_detection_*.tflite`` and
``hand_landmark_*.tflite``) in video mode: palms are detected until hands are found, then each
hand is followed from its own landmarks (MediaPipe's tracking), and detected again when it is
lost. Frames are scaled down to ``max_side_px`` first: a hand in front of a face is large, and
the networks' inputs are 192 and 224 px anyway, so a 1080p frame costs what a small one does.

Used by :mod:`livecam.swap.occlusion` to keep hands in front of the swapped face. One thread
(the pipeline thread) calls :meth:`HandLandmarker.detect`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from livecam.core.lifecycle import Lifecycle
from livecam.core.types import FloatArray, ImageBGR

#: MediaPipe's hand landmark indices: wrist, then four points per finger from the base.
WRIST = 0
FINGERS = ((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16), (17, 18, 19, 20))
PALM = (0, 1, 5, 9, 13, 17)


@dataclass(frozen=True, slots=True)
class Hands:
    """Hands in one frame: ``landmarks_xy`` (H, 21, 2) float32 px, ``scores`` (H,) float32
    (MediaPipe's handedness score of each kept hand)."""

    landmarks_xy: FloatArray = field(
        default_factory=lambda: np.zeros((0, 21, 2), np.float32))
    scores: FloatArray = field(default_factory=lambda: np.zeros((0,), np.float32))

    def __len__(self) -> int:
        return len(self.landmarks_xy)


class HandLandmarker(Lifecycle):
    """MediaPipe Hands on video frames (see the module docstring).

    ``max_hands``: most hands followed. ``min_score``: palm detection confidence and hand
    presence (tracking) confidence a hand needs. ``model_complexity``: 0 (``*_lite``) or 1
    (``*_full``, finds hands at the frame's edge and small ones more often; slower).
    ``max_side_px``: frames are scaled so their longer side is at most this before detection.
    """

    def __init__(self, *, max_hands: int = 2, min_score: float = 0.6,
                 model_complexity: int = 1, max_side_px: int = 640) -> None:
        self.max_hands = max_hands
        self.min_score = min_score
        self.model_complexity = model_complexity
        self.max_side_px = max_side_px
        self._hands: Any = None

    def open(self) -> None:
        if self._hands is None:
            import mediapipe as mp

            self._hands = mp.solutions.hands.Hands(
                static_image_mode=False, max_num_hands=self.max_hands,
                model_complexity=self.model_complexity,
                min_detection_confidence=self.min_score,
                min_tracking_confidence=self.min_score)

    def close(self) -> None:
        if self._hands is not None:
            self._hands.close()
            self._hands = None

    def detect(self, image_bgr: ImageBGR) -> Hands:
        """The hands in an (H, W, 3) uint8 BGR frame, landmarks in its pixels."""
        if self._hands is None:
            raise RuntimeError("HandLandmarker.detect called before open()")
        h, w = image_bgr.shape[:2]
        scale = min(1.0, self.max_side_px / max(h, w))
        small = image_bgr
        if scale < 1.0:
            small = np.asarray(cv2.resize(image_bgr, (round(w * scale), round(h * scale)),
                                          interpolation=cv2.INTER_AREA), np.uint8)
        result = self._hands.process(cv2.cvtColor(small, cv2.COLOR_BGR2RGB))
        marks = result.multi_hand_landmarks or []
        if not marks:
            return Hands()
        size = np.array([w, h], np.float32)
        points = np.array([[[p.x, p.y] for p in hand.landmark] for hand in marks],
                          np.float32) * size
        scores = np.array([c.classification[0].score for c in result.multi_handedness or []]
                          or [1.0] * len(marks), np.float32)
        return Hands(points, scores[:len(points)])

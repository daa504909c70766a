"""Hands in front of the face: the region drawn from known landmarks, and a clip built from
real photos (a real hand from insightface's t1.jpg moved across the astronaut's face).

No photo of a hand *over a face* is installed here, so the clip composites one: the hand is cut
out of t1.jpg along the region our own mask draws from MediaPipe's landmarks on t1 (there is no
hand segmentation to cut with), scaled, and laid over the astronaut. The hand found on each
composite frame is an independent detection; the test checks that the hand as it was laid in
stays in front of the swapped face and that the rest of the face is still swapped.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.analysis.hands import HandLandmarker, Hands
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.swap.occlusion import HandsInFront, hand_alpha, keep_in_front, knuckle_spacing_px


def _open_hand(centre_xy: tuple[float, float], scale: float) -> np.ndarray:
    """21 landmarks of an upright open hand with spread fingers (MediaPipe order), px."""
    cx, cy = centre_xy
    wrist = (0.0, 1.0)
    bases = [(-0.55, 0.55), (-0.3, 0.0), (-0.1, -0.05), (0.1, -0.05), (0.3, 0.0)]
    angles = np.radians([-60, -25, -8, 8, 25])  # thumb .. little finger, spread
    lengths = [0.25, 0.3, 0.33, 0.3, 0.25]
    points = [wrist]
    for (bx, by), angle, step in zip(bases, angles, lengths, strict=True):
        d = (np.sin(angle), -np.cos(angle))
        points += [(bx + d[0] * step * j, by + d[1] * step * j) for j in range(4)]
    return (np.array(points, np.float32) * scale + (cx, cy)).astype(np.float32)


def test_hand_region_covers_palm_and_fingers_not_the_gaps() -> None:
    points = _open_hand((300, 300), 200)
    alpha = hand_alpha(Hands(points[None], np.ones(1, np.float32)), (600, 600))
    spacing = knuckle_spacing_px(points)
    assert 30 < spacing < 60
    palm = points[[0, 5, 9, 13, 17]].mean(axis=0)
    assert alpha[int(palm[1]), int(palm[0])] == pytest.approx(1.0)
    for finger in ((5, 6, 7, 8), (9, 10, 11, 12), (17, 18, 19, 20)):
        mid = points[[finger[1], finger[2]]].mean(axis=0)
        assert alpha[int(mid[1]), int(mid[0])] > 0.99
    # between the spread tips of the index and middle fingers, and the little and ring
    for a, b in ((8, 12), (16, 20)):
        gap = points[[a, b]].mean(axis=0)
        assert alpha[int(gap[1]), int(gap[0])] < 0.05
    assert alpha[20, 20] == 0.0 and alpha[590, 590] == 0.0
    assert alpha.min() >= 0.0 and alpha.max() <= 1.0


def test_keep_in_front_takes_captured_pixels_only_on_the_hand() -> None:
    points = _open_hand((100, 100), 80)
    hands = Hands(points[None], np.ones(1, np.float32))
    captured = np.full((200, 200, 3), 200, np.uint8)
    swapped = np.full((200, 200, 3), 50, np.uint8)
    out = keep_in_front(swapped, captured, hands)
    alpha = hand_alpha(hands, (200, 200))
    assert (swapped == 50).all() and (captured == 200).all()  # inputs untouched
    assert (out[alpha > 0.999] == 200).all() and (out[alpha == 0] == 50).all()


class _CountingLandmarker(HandLandmarker):
    def __init__(self, found: Hands | None = None) -> None:
        super().__init__()
        self.calls = 0
        self.found = found or Hands()

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def detect(self, image_bgr: np.ndarray) -> Hands:
        self.calls += 1
        return self.found


def test_frames_nobody_swapped_are_not_searched() -> None:
    landmarker = _CountingLandmarker()
    stage = HandsInFront(landmarker)
    image = np.zeros((64, 64, 3), np.uint8)
    packet = Packet.from_frame(Frame(0, 0, image))
    assert stage.process(packet) is packet and landmarker.calls == 0
    assert stage.process(packet.with_fields(image_bgr=image.copy())) is not None
    assert landmarker.calls == 1


def test_search_cadence_while_no_hand_is_followed() -> None:
    image = np.zeros((64, 64, 3), np.uint8)
    swapped = Packet.from_frame(Frame(0, 0, image)).with_fields(image_bgr=image.copy())
    idle = _CountingLandmarker()
    stage = HandsInFront(idle, search_every_n_frames=3)
    for _ in range(7):
        stage.process(swapped)
    assert idle.calls == 3  # frames 1, 4 and 7
    hand = Hands(_open_hand((32, 32), 20)[None], np.ones(1, np.float32))
    following = _CountingLandmarker(hand)
    stage = HandsInFront(following, search_every_n_frames=3)
    for _ in range(7):
        stage.process(swapped)
    assert following.calls == 7  # a followed hand is tracked on every frame


@pytest.fixture(scope="module")
def hand_sprite() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hand holding cards in t1.jpg (the leftmost hand MediaPipe finds there): (BGR, the
    cut-out's alpha, the hand's own region), the cut-out being our region of its landmarks
    grown by half a knuckle spacing of the photo around it (MediaPipe's palm detector wants a
    little context; a tight cut-out is not found)."""
    import insightface

    t1 = insightface.data.get_image("t1")
    with HandLandmarker(max_hands=4, min_score=0.5, max_side_px=1280) as landmarker:
        hands = landmarker.detect(t1)
    assert len(hands) >= 2, "MediaPipe should find the hands in t1.jpg"
    pick = int(np.argmin(hands.landmarks_xy[:, :, 0].mean(axis=1)))
    points = hands.landmarks_xy[pick]
    core = hand_alpha(Hands(points[None], hands.scores[pick:pick + 1]), t1.shape[:2])
    k = 2 * int(0.5 * knuckle_spacing_px(points)) + 1
    cut = cv2.dilate((core > 0.5).astype(np.float32), np.ones((k, k), np.uint8))
    cut = cv2.GaussianBlur(cut, (9, 9), 3)
    ys, xs = np.nonzero(cut > 0.01)
    box = (slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1))
    return t1[box], cut[box], core[box]


def _clip(face_bgr: np.ndarray, sprite: tuple[np.ndarray, np.ndarray, np.ndarray],
          box_xyxy: np.ndarray, n: int = 8) -> list[tuple[np.ndarray, np.ndarray]]:
    """Frames with the hand moving left to right across the lower half of the face, the hand
    (its own region) as wide as the face: (frame, the hand's own region in it)."""
    colour, cut, core = sprite
    x1, y1, x2, y2 = box_xyxy
    xs = np.nonzero((core > 0.5).any(axis=0))[0]
    scale = (x2 - x1) / (xs.max() - xs.min() + 1)
    colour = cv2.resize(colour, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    size = (colour.shape[1], colour.shape[0])
    cut = cv2.resize(cut, size, interpolation=cv2.INTER_LINEAR)
    core = cv2.resize(core, size, interpolation=cv2.INTER_LINEAR)
    h, w = colour.shape[:2]
    top = int(y1 + 0.6 * (y2 - y1) - h / 2)
    frames = []
    for i in range(n):
        left = int(x1 - 0.3 * w + i * ((x2 - x1) - 0.4 * w) / (n - 1))
        placed_cut = np.zeros(face_bgr.shape[:2], np.float32)
        placed_core = np.zeros(face_bgr.shape[:2], np.float32)
        patch = np.zeros(face_bgr.shape, np.float32)
        placed_cut[top:top + h, left:left + w] = cut
        placed_core[top:top + h, left:left + w] = core
        patch[top:top + h, left:left + w] = colour
        a = placed_cut[:, :, None]
        frame = np.round(a * patch + (1 - a) * face_bgr).astype(np.uint8)
        frames.append((frame, placed_core))
    return frames


@pytest.mark.slow
def test_real_hand_stays_in_front_of_the_swapped_face(
        tmp_path: Path, astronaut_bgr: np.ndarray,
        hand_sprite: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    from livecam.analysis.photo import analyze_photo
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.swap.inswapper import InswapperModel
    from livecam.swap.neural import NeuralSwapStage
    from tests.helpers.standins import build_inswapper

    faces = analyze_photo(astronaut_bgr).with_fields(track_ids=np.array([1], np.int64))
    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    embedding = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    swap = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                          model_path), lambda name: embedding)
    hands_stage = HandsInFront(HandLandmarker(max_hands=2, min_score=0.6))
    state = RuntimeState(active_identity="someone")
    detected, kept, painted, exposed = 0, [], [], []
    clip = _clip(astronaut_bgr, hand_sprite, faces.boxes_xyxy[0])
    with swap, hands_stage:
        for index, (frame, hand) in enumerate(clip):
            packet = Packet(frame=Frame(index, 0, frame), image_bgr=frame, faces=faces,
                            state=state)
            swapped = swap.process(packet)
            out = hands_stage.process(swapped).image_bgr
            changed = (swapped.image_bgr != frame).any(axis=-1)  # the swap's footprint
            core = cv2.erode((hand > 0.99).astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
            core &= changed  # the hand where it lies over the swapped face
            assert core.sum() > 500
            painted.append(float(changed[core].mean()))
            if len(hands_stage.last_hands) == 0:
                continue
            detected += 1
            real = (out == frame).all(axis=-1)
            kept.append(float(real[core].mean()))
            # face pixels shown as captured although no hand lies on them: the live face
            # (the swap's footprint, away from the hand and its soft edge)
            away = changed & (cv2.dilate((hand > 0.01).astype(np.uint8),
                                         np.ones((7, 7), np.uint8)) == 0)
            exposed.append(float((real & away).sum() / changed.sum()))
    n = len(clip)
    print(f"hand found in {detected}/{n} frames; where found, hand pixels over the face kept in "
          f"front: mean {np.mean(kept):.3f}, min {np.min(kept):.3f}; live face shown beside "
          f"the hand: mean {np.mean(exposed):.4f}, max {np.max(exposed):.4f} of the swapped "
          f"area; without the stage the swap paints {np.mean(painted):.4f} of the hand")
    assert np.mean(painted) > 0.99  # the defect: without the stage the hand disappears
    assert detected >= n - 2
    assert np.mean(kept) > 0.85
    # of the swap's footprint, which is the face's outline (the aligned square before, 2.6x
    # larger: max 0.052 of it then, 0.11 of the outline now, fewer pixels)
    assert np.max(exposed) < 0.15

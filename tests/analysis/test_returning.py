"""Where a face was hidden longer than its lost cover lasts (livecam.analysis.returning): the
place is covered from the frame it changes, not while what hides the face stays still."""

from __future__ import annotations

import numpy as np

from livecam.analysis.memory import HiddenFaces
from livecam.analysis.returning import ReturnWatch, changed, thumbnail
from livecam.core.types import Unswappable
from livecam.track.bytetrack import LostTrack

PLACE = np.array([500, 200, 700, 420], np.float32)
NONE = np.zeros((0, 4), np.float32)


def _frame(seed: int = 0) -> np.ndarray:
    """A 720p frame: a grey board with sensor noise (sigma 2) over where the face was."""
    rng = np.random.default_rng(seed)
    image = np.full((720, 1280, 3), 90, np.float32)
    image[:, 400:800] = (150, 160, 170)  # the board
    return np.clip(image + rng.normal(0, 2, image.shape), 0, 255).astype(np.uint8)


def _sliver(image: np.ndarray, width_px: int) -> np.ndarray:
    """``image`` with a face's first ``width_px`` coming out at the place's right side."""
    out = image.copy()
    x2 = int(PLACE[2])
    out[260:380, x2 - width_px:x2] = (60, 110, 200)  # skin, darker than the board
    return out


def test_a_still_place_is_not_covered_and_a_changed_one_is_from_that_frame() -> None:
    watch = ReturnWatch(fps=30.0)
    assert len(watch.update(_frame(0), 100, [PLACE], NONE)) == 0
    for t in range(101, 110):  # the board stays: new noise each frame, nothing covered
        assert len(watch.update(_frame(t), t, [], NONE)) == 0
    # a 7 % sliver of the place's width (14 of 200 px) on the frame it comes out
    out = watch.update(_sliver(_frame(110), 14), 110, [], NONE)
    assert len(out) == 1
    assert out.boxes_xyxy[0].tolist() == PLACE.tolist()
    assert out.track_ids.tolist() == [-1]  # no track: no held swap is drawn there
    assert out.reasons.tolist() == [Unswappable.LOST]
    # it stays covered while nothing is swapped there, even once the place holds still
    assert len(watch.update(_sliver(_frame(111), 14), 111, [], NONE)) == 1


def test_a_change_of_the_whole_place_alike_is_not_a_face() -> None:
    """An exposure change moves every cell alike: the median change is taken out."""
    before = thumbnail(_frame(0), PLACE)
    brighter = np.clip(_frame(1).astype(np.int16) + 30, 0, 255).astype(np.uint8)
    assert before is not None
    now = thumbnail(brighter, PLACE)
    assert now is not None and not changed(before, now)


def test_a_face_swapped_on_the_place_ends_the_watch_and_the_watch_ends_in_time() -> None:
    watch = ReturnWatch(fps=30.0)
    watch.update(_frame(0), 0, [PLACE], NONE)
    assert len(watch.update(_sliver(_frame(1), 40), 1, [], NONE)) == 1
    face = np.array([[540, 230, 690, 400]], np.float32)  # followed and swapped there now
    assert len(watch.update(_sliver(_frame(2), 40), 2, [], face)) == 0
    assert watch.watching == 0

    watch.update(_frame(0), 0, [PLACE], NONE)
    last = watch.frames
    assert len(watch.update(_sliver(_frame(1), 40), last, [], NONE)) == 1
    assert len(watch.update(_sliver(_frame(2), 40), last + 1, [], NONE)) == 0
    assert watch.watching == 0


def test_the_same_place_expiring_again_is_watched_once() -> None:
    """The tracker keeps a lost track a while longer, and it expires again each frame: the
    place keeps the picture taken when it first expired."""
    watch = ReturnWatch(fps=30.0)
    watch.update(_frame(0), 0, [PLACE], NONE)
    # the place has changed by the time it expires again: still covered, from the first
    out = watch.update(_sliver(_frame(1), 40), 1, [PLACE + 2.0], NONE)
    assert watch.watching == 1 and len(out) == 1


def test_a_lost_face_whose_cover_ends_in_the_frame_is_handed_over() -> None:
    hidden = HiddenFaces(cover_frames=5)
    box = np.array([500, 200, 700, 420], np.float32)
    out_box = np.array([1250, 200, 1450, 420], np.float32)  # mostly beyond the right edge
    for t in range(1, 10):
        lost = [LostTrack(1, box, t), LostTrack(2, out_box, t)]
        covered = hidden.update(lost, {}, (1280, 720), t, set(), NONE, [])
        if t <= 5:
            assert covered.track_ids.tolist() == [1]
            assert hidden.expired == []
        if t == 6:
            assert len(covered) == 0
            assert len(hidden.expired) == 1  # the one in the frame, as last covered
            x1, y1, x2, y2 = hidden.expired[0].tolist()
            assert x1 < 500 and x2 > 700 and y1 < 200 and y2 > 420

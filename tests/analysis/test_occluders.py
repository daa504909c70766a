"""A followed face's look (livecam.analysis.occluders): something reaching in over it from a side
shows; the face's own changes (exposure, its mouth) do not."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.analysis.occluders import Advancing, side_cells

# the astronaut's face in skimage's photo (512x512), placed at (400, 100) in a 720p frame
FACE = (580.0, 160.0, 720.0, 330.0)
BOARD_BGR = (60, 90, 120)


@pytest.fixture
def scene(astronaut_bgr: np.ndarray) -> np.ndarray:
    frame = np.full((720, 1280, 3), 100, np.uint8)
    frame[100:612, 400:912] = astronaut_bgr
    return frame


def _noisy(frame: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(frame + rng.normal(0, 2, frame.shape), 0, 255).astype(np.uint8)


def _board(frame: np.ndarray, right_px: float) -> np.ndarray:
    """``frame`` with a board from the left edge to ``right_px`` over the face's rows."""
    out = frame.copy()
    out[120:370, :int(right_px)] = BOARD_BGR
    return out


def test_a_board_sliding_in_from_the_left_shows_once_it_is_on_the_face(
        scene: np.ndarray) -> None:
    watch = Advancing()
    width = FACE[2] - FACE[0]
    flags = []
    for t, share in enumerate([0.0, 0.0, 0.0, 0.05, 0.1, 0.25, 0.35, 0.35, 0.35]):
        image = _noisy(_board(scene, FACE[0] + share * width), t)
        flags.append(watch.update(image, [7], [FACE], {7}) == [0])
    # nothing while the board is outside the inner box (10 % in from each side); from a
    # quarter of the face on, and while it stays
    assert flags == [False, False, False, False, False, True, True, True, True]


def test_the_face_s_own_changes_do_not_show(scene: np.ndarray) -> None:
    watch = Advancing()
    assert watch.update(_noisy(scene, 0), [7], [FACE], {7}) == []
    brighter = np.clip(scene.astype(np.int16) + 30, 0, 255).astype(np.uint8)
    assert watch.update(_noisy(brighter, 1), [7], [FACE], {7}) == []  # exposure
    mouth = scene.copy()
    mouth[270:300, 620:680] = 20  # the mouth opens: a dark patch inside the face
    assert watch.update(_noisy(mouth, 2), [7], [FACE], {7}) == []


def test_a_face_lost_and_found_again_is_compared_with_its_look_from_before(
        scene: np.ndarray) -> None:
    """The look is kept while the track is known: found again with a board still over a third
    of it, the face shows it; a track no longer known starts a new look."""
    watch = Advancing()
    watch.update(_noisy(scene, 0), [7], [FACE], {7})
    half = _noisy(_board(scene, FACE[0] + 0.35 * (FACE[2] - FACE[0])), 1)
    assert watch.update(half, [7], [FACE], {7}) == [0]
    watch.update(half, [], [], set())  # track 7 forgotten
    assert watch.update(half, [7], [FACE], {7}) == []  # a new look: nothing to compare


def test_side_cells_reach_in_from_one_side_over_half_the_rows() -> None:
    n = 12
    grid = [[c < 2 for c in range(n)] if r < 6 else [False] * n for r in range(n)]
    covered, on = side_cells(grid)
    assert covered and sum(on) == 12
    grid[5] = [False] * n  # 5 rows of 12: under half
    assert not side_cells(grid)[0]
    middle = [[3 <= c < 9 and 3 <= r < 9 for c in range(n)] for r in range(n)]  # inside
    assert side_cells(middle) == (False, [False] * (n * n))

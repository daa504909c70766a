"""Faces cut by the frame's edge, judged from their first visible pixel: through livecam's own
analysis and classic swap stages in this process (offline, every frame; the live runs are
test_leak_live.py), each edge's face is covered or swapped, never shown as it is."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.analysis.edges import crosses_edge, edge_strips
from tests.helpers.leak_clips import LeakClip
from tests.helpers.leak_run import run_in_process


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray) -> Path:
    path = tmp_path_factory.mktemp("identity") / "astronaut.png"
    cv2.imwrite(str(path), astronaut_bgr)
    return path


def test_edge_strips_map_back_onto_the_frame() -> None:
    image = np.zeros((720, 1280, 3), np.uint8)
    image[100:140, 0:30] = 255  # a mark at the left edge
    strips = edge_strips(image)
    assert len(strips) == 6 and all(s.image_bgr.shape == (720, 720, 3) for s in strips)
    left = strips[0]
    ys, xs = np.nonzero(left.image_bgr[:, :, 0])
    # the real half holds the mark where the frame has it; the mirror beside it, outside
    assert (xs + left.offset_xy[0]).max() == 29 and (ys + left.offset_xy[1]).min() == 100
    assert (xs + left.offset_xy[0]).min() < 0
    assert crosses_edge(np.array([-50, 100, 40, 200], np.float32), 1280, 720)
    assert not crosses_edge(np.array([-90, 100, 2, 200], np.float32), 1280, 720)  # all out
    assert not crosses_edge(np.array([10, 100, 90, 200], np.float32), 1280, 720)  # inside


def _leaks(clip: LeakClip, photo: Path, *settings: str, frames: int) -> list[tuple[int, float]]:
    _, _, report = run_in_process(clip, photo, *settings, frames=frames)
    assert report.faces_judged >= frames - 2
    return [(v.input_frame, v.visible) for v in report.leaked]


def test_a_face_cut_by_the_left_edge_is_covered(clips: dict[str, LeakClip],
                                                photo: Path) -> None:
    """About half the face in view, still: BlazeFace alone never finds it (45 of 45 frames
    leaked with ``advanced.analysis.edge_search=false``)."""
    assert _leaks(clips["cut_left"], photo, frames=8) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cut_top", "cut_bottom", "cut_right"])
def test_a_face_cut_by_each_edge_is_covered(name: str, clips: dict[str, LeakClip],
                                            photo: Path) -> None:
    assert _leaks(clips[name], photo, frames=20) == []


def test_a_face_hidden_behind_a_board_leaves_no_swap_on_it(clips: dict[str, LeakClip],
                                                            photo: Path) -> None:
    """While the board hides the whole face, nothing of its swap is painted on the board
    (before: the held swap for ``swap.hold_frames``, 8 frames, on every hidden frame here)."""
    _, truths, report = run_in_process(clips["hidden"], photo, frames=26)
    hidden = {t for t, truth in enumerate(truths) if not len(truth.ids)}
    assert len(hidden) >= 8
    judged = [g for g in report.ghosts_judged if g.input_frame in hidden]
    assert judged
    assert [g for g in judged if g.ghost] == []

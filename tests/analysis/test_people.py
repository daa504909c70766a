"""People no face is known of (livecam/analysis/people.py): MediaPipe's real selfie
segmentation model on the leak clips' real faces (insightface's ``t1``) and skimage's
astronaut."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.analysis import build_follower
from livecam.analysis.people import FacelessPeople
from livecam.config import load_config
from livecam.core.boxes import share_in
from livecam.core.types import Unswappable
from tests.helpers.leak_clips import leak_clips


@pytest.fixture(scope="module")
def hidden(t1_bgr: np.ndarray) -> list:
    """The ``hidden`` clip's frames and truths (a board slides over a face and away)."""
    return list(leak_clips(t1_bgr)["hidden"].frames())


@pytest.fixture(scope="module")
def people() -> FacelessPeople:
    found = FacelessPeople()
    found.open()
    return found


@pytest.mark.parametrize("index", [13, 14, 55, 56])
def test_a_sliver_of_a_face_beside_the_board_is_covered_whole(
        index: int, hidden: list, people: FacelessPeople) -> None:
    """10-20 % of the face in view beside the board: one cover holds the part of its box in
    view (the box's corners beyond the face's oval aside: at least 85 % of it)."""
    frame, truth = hidden[index]
    assert len(truth.ids) == 1 and float(truth.fractions[0]) <= 0.25
    ys, xs = np.nonzero(truth.masks[0])
    x0, y0 = max(0.0, float(truth.boxes_xyxy[0][0])), max(0.0, float(truth.boxes_xyxy[0][1]))
    seen = [x0 + xs.min(), y0 + ys.min(), x0 + xs.max() + 1, y0 + ys.max() + 1]
    covers = people.covers(frame)
    assert len(covers) == 1
    assert covers.reasons.tolist() == [Unswappable.NO_MESH] and covers.track_ids.tolist() == [-1]
    assert share_in(seen, covers.boxes_xyxy[0].tolist()) >= 0.85


def test_frames_with_only_the_board_get_no_cover(hidden: list,
                                                 people: FacelessPeople) -> None:
    """The frames the board hides the face whole: the model's small regions there (the
    board's edge, the frame code's bars along the bottom) are not people."""
    empty = [t for t, (_, truth) in enumerate(hidden) if not len(truth.ids)]
    assert len(empty) > 30
    covers = {t: people.covers(hidden[t][0]).boxes_xyxy.tolist() for t in empty}
    assert {t: boxes for t, boxes in covers.items() if boxes} == {}


@pytest.mark.parametrize("cover_people", [True, False])
def test_the_follower_searches_people_only_on_frames_with_no_face_known(
        cover_people: bool, hidden: list, astronaut_bgr: np.ndarray) -> None:
    """A stream whose first frame has 20 % of the face beside the board (``hidden`` input
    frame 13): nothing else finds it, so only the people search covers it. A frame with a
    face followed never runs the search."""
    config = load_config(None, [f"advanced.analysis.cover_people={str(cover_people).lower()}"])
    follower = build_follower(config.analysis)
    follower.open()
    try:
        faces, withheld = follower.follow(hidden[13][0], 13)
        assert len(faces) == 0
        assert len(withheld) == int(cover_people)
        assert ("people" in follower.last_timings_ms) == cover_people
    finally:
        follower.close()
    follower = build_follower(config.analysis)
    follower.open()
    try:
        faces, withheld = follower.follow(astronaut_bgr, 0)
        assert len(faces) == 1 and len(withheld) == 0
        assert "people" not in follower.last_timings_ms  # the astronaut's body: not searched
    finally:
        follower.close()


def test_a_missing_model_is_said_at_start_in_one_line(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A models folder without the segmentation model (``LIVECAM_MEDIAPIPE_MODULES``, as on a
    machine without mediapipe) is refused when the follower opens, naming the setting, not
    on the first empty frame in the middle of a run."""
    from livecam.core.errors import ModelError

    monkeypatch.setenv("LIVECAM_MEDIAPIPE_MODULES", str(tmp_path))
    with pytest.raises(ModelError, match=r"advanced\.analysis\.cover_people"):
        FacelessPeople().open()

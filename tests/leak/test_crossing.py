"""Two faces crossing, the second in front, with live mode's drops replayed: the face behind,
coming back out beside the face in front, is covered from its first sliver. Through livecam's
own analysis and classic swap stages in this process, judged from the output's pixels.

The clip plays twice, as in the live measure (``advanced.capture.loop``: the frame index runs
on, the faces jump back to where they started), and only every 8th input frame is followed,
as on a loaded host: after the jump back the face behind is followed again only a few frames
before it is hidden, its track's speed still under the true one, so where its tracker
predicts it lags behind where it comes back out.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.core.types import ImageBGR
from tests.helpers.clips import FrameTruth
from tests.helpers.leak_clips import LeakClip
from tests.helpers.leak_judge import LeakReport, judge
from tests.helpers.leak_run import IDENTITY


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray) -> Path:
    path = tmp_path_factory.mktemp("identity") / "astronaut.png"
    cv2.imwrite(str(path), astronaut_bgr)
    return path


def _looped(clip: LeakClip, photo: Path, passes: int, every: int, offset: int) -> LeakReport:
    """``clip`` played ``passes`` times (frame indices running on), every ``every``-th frame
    from ``offset`` through the analysis and classic swap stages, judged."""
    return _followed(clip, photo, range(offset, passes * clip.n_frames, every))


def _followed(clip: LeakClip, photo: Path, indices: Iterable[int]) -> LeakReport:
    """The frames ``indices`` of ``clip`` played on in a loop (index ``t`` shows the clip's
    frame ``t % n_frames``) through the analysis and classic swap stages, judged."""
    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState
    from livecam.identity import IdentityCollection, identity_from_photo
    from livecam.swap.stage import ClassicSwapStage

    config = load_config(None, ["advanced.pipeline.realtime=false", *clip.settings])
    identities = IdentityCollection({IDENTITY: identity_from_photo(photo, config.identity)})
    state = RuntimeState(active_identity=IDENTITY, identities=(IDENTITY,))
    frames = list(clip.frames())
    inputs: list[ImageBGR] = [image for image, _ in frames]
    truths: list[FrameTruth] = [truth for _, truth in frames]
    outputs: list[ImageBGR] = []
    analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
    analysis.open()
    try:
        with ClassicSwapStage(config.swap, identities) as swap:
            for t in indices:
                image = inputs[t % len(frames)]
                packet = analysis.process(Packet.from_frame(Frame(t, 0, image), state))
                outputs.append(swap.process(packet).image_bgr)
    finally:
        analysis.close()
    return judge(inputs, truths, outputs)


@pytest.mark.slow
def test_the_face_behind_is_covered_as_it_comes_out_beside_the_face_in_front(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """Second pass, every 8th frame from frame 6 (frames 70-139, the clip's 0-69
    again).
    Before: at input frame 40 (the face behind 52 % in view, out on the far side of the face
    in front) its lost cover sat where its tracker predicted it, 100 px short, and the half
    of it in view showed as it is, though the detector found it (0.43, a weak detection)."""
    report = _looped(clips["crossing"], photo, passes=2, every=8, offset=6)
    behind = [v for v in report.verdicts if v.face_id == 1 and 36 <= v.input_frame < 44]
    assert behind, "the face behind was not judged as it comes out"
    assert [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
            for v in report.leaked] == []


@pytest.mark.slow
def test_the_face_behind_is_covered_when_no_track_predicts_it(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """Live mode on a loaded host follows the clip's frame 60, then frames 4 and 31 of the
    second pass (a live run followed 349, 354, 364, 374, 381: the same leak). Across the jump
    back the two tracks swap people and learn each other's speed the wrong way; 27 frames on,
    both are predicted far from either face (LOST covers at x 1005-1236 and 29-304), the face
    in front is found again as a new face (covered, PENDING), and the face behind, 24 % in
    view beside it and not detected, was covered by nothing: shown as it is (residual 0.0).
    The same with no loop: frames 4 and 31 alone. Now the sides of the face in front are
    covered while a lost face's cover lies on no face in view (livecam/analysis/behind.py)."""
    for followed in ([60, 74, 101], [4, 31]):
        report = _followed(clips["crossing"], photo, followed)
        assert any(v.face_id == 1 and v.input_frame == 31 for v in report.verdicts)
        assert [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
                for v in report.leaked] == []


@pytest.mark.slow
def test_the_face_behind_is_covered_coming_out_after_its_track_took_the_face_in_front(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """The frames a live run followed (349, 354, 364, 374, 381: the clip's 69, then 4, 14,
    24 and 31 of the next pass), on to 34, 38 and 40. Across the jump back one track is
    left far from both faces (lost, covered at x 913-1133), the other follows the face
    behind, then slides onto the face in front at input frame 31: the face behind, beside
    it, was shown as it is at input frames 31 (24 % in view), 38 (23 %) and 40 (52 %, a weak
    detection at 0.43 too far from the lost cover to count as that face coming out)."""
    report = _followed(clips["crossing"], photo,
                       [59, 69, 74, 84, 94, 101, 104, 108, 110])
    behind = {v.input_frame for v in report.verdicts if v.face_id == 1}
    assert {31, 38, 40} <= behind, behind
    assert [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
            for v in report.leaked] == []


@pytest.mark.slow
def test_the_face_behind_is_covered_after_a_gap_longer_than_a_lost_cover(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """Frames a live run followed: the clip's 64 and 68, its frame 0 on the next pass, then
    a gap of 33 frames (input frame 103, the clip's 33). Both tracks are found lost there over
    more than ``lost_cover_frames`` (30), predicted off the frame, so no lost cover is drawn;
    the face in front is a new face. The face behind, coming out beside it at input frame 40
    (52 % in view, a weak detection at 0.43 that no lost cover is near), was shown as it is."""
    report = _followed(clips["crossing"], photo, [64, 68, 70, 103, 104, 107, 110])
    assert any(v.face_id == 1 and v.input_frame == 40 for v in report.verdicts)
    assert [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
            for v in report.leaked] == []


@pytest.mark.slow
def test_the_face_behind_is_covered_after_its_lost_cover_ended(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """The first 52 frames another live run followed (four passes of the clip). On the
    fourth, a track left astray (lost at x 1163-1397, where no face is) covers nothing from
    33 frames after it was last seen, while the face behind comes out beside the face in
    front: shown as it is at input frame 39 (38 % in view); at input frame 31 (24 %) too
    before the sides of the face in front were covered."""
    followed = [0, 1, 5, 11, 17, 19, 23, 26, 32, 33, 34, 38, 42, 54, 63, 68, 69, 70, 79, 88,
                104, 112, 121, 128, 135, 138, 139, 141, 148, 155, 159, 162, 165, 167, 170, 173,
                176, 178, 183, 190, 195, 200, 205, 209, 210, 216, 228, 238, 241, 244, 249, 256]
    report = _followed(clips["crossing"], photo, followed)
    assert {31, 39} <= {v.input_frame for v in report.verdicts if v.face_id == 1}
    assert [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
            for v in report.leaked] == []

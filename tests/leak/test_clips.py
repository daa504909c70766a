"""The leak clips' ground truth: who is visible where, how much of them, from which frame; the
frame number drawn into clip frames survives H.264 and reads back exactly, or not at all."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.helpers.clips import FrameTruth
from tests.helpers.leak_clips import CODE_BITS, CODE_BOX_XYXY, LeakClip, read_index, stamp
from tests.helpers.leak_judge import first_full_view


@pytest.fixture(scope="module")
def rendered(clips: dict[str, LeakClip]) -> dict[str, tuple[list[FrameTruth], list[int | None]]]:
    """Each clip rendered once (all its HD frames are too many to keep): its truth per frame
    and the index read back from each of its first three frames."""
    out = {}
    for name, clip in clips.items():
        truth, first_indices = [], []
        for t, (frame, frame_truth) in enumerate(clip.frames()):
            truth.append(frame_truth)
            if t < 3:
                first_indices.append(read_index(frame))
        out[name] = (truth, first_indices)
    return out


@pytest.fixture(scope="module")
def truths(rendered: dict[str, tuple[list[FrameTruth], list[int | None]]]
           ) -> dict[str, list[FrameTruth]]:
    return {name: truth for name, (truth, _) in rendered.items()}


@pytest.mark.slow  # builds every leak clip (about a minute on 2 cores)
def test_every_clip_is_numbered_and_keeps_faces_off_the_code(
        clips: dict[str, LeakClip],
        rendered: dict[str, tuple[list[FrameTruth], list[int | None]]]) -> None:
    _, y0, x1, _ = CODE_BOX_XYXY
    assert set(rendered) == set(clips)
    for name, clip in clips.items():
        truth, first_indices = rendered[name]
        assert len(truth) == clip.n_frames, name  # one truth per frame rendered
        assert first_indices == [0, 1, 2], name
        for t in truth:
            for box in t.boxes_xyxy:
                assert box[3] < y0 or box[0] > x1, name  # no face over the frame code


@pytest.mark.slow  # builds every leak clip (about a minute on 2 cores)
def test_the_scenarios_are_what_they_say(truths: dict[str, list[FrameTruth]]) -> None:
    assert all(len(t.ids) == 2 for t in truths["still_2"])
    assert all(len(t.ids) == 6 and (t.fractions == 1).all() for t in truths["still_6"])
    enter = truths["enter"]
    assert enter[0].ids.tolist() == [1] and enter[-1].ids.tolist() == [1, 2]
    full = first_full_view(enter)
    assert full[1] == 0 and 5 < full[2] < 30  # the walker is whole only after walking in
    leave = truths["leave_reenter"]
    shown = [2 in t.ids or 1 in t.ids for t in leave]
    assert shown[0] and not all(shown) and shown[-1]  # out, then back
    turn = [t.boxes_xyxy[0] for t in truths["turn"]]
    widths = np.array([b[2] - b[0] for b in turn])
    assert widths.min() < 0.45 * widths[0]  # 70 degrees: a much narrower face
    hidden = truths["half_hidden"]
    assert min(t.fractions[0] for t in hidden) < 0.6 and hidden[0].fractions[0] > 0.97
    half = min(hidden, key=lambda t: t.fractions[0])
    mask = half.masks[0]
    assert not mask[:, : mask.shape[1] // 3].any() and mask[:, -mask.shape[1] // 4:].all()
    crossing = truths["crossing"]
    # one hides the other for a while (all but a sliver: it is listed from its first pixel)
    assert min(float(t.fractions.min()) for t in crossing) < 0.25
    for edge in ("top", "bottom", "left", "right"):
        cut = truths[f"cut_{edge}"]
        assert all(0.4 < t.fractions[0] < 0.7 for t in cut), edge  # about half in view
        slide = truths[f"slide_{edge}"]
        assert not len(slide[0].ids) and slide[-1].fractions[0] > 0.97, edge
        # listed from its first visible pixel: a sliver first
        assert min(t.fractions[0] for t in slide if len(t.ids)) < 0.1, edge
    hidden = truths["hidden"]
    assert hidden[0].fractions[0] > 0.97 and hidden[-1].fractions[0] > 0.97
    gone = [t for t in hidden if not len(t.ids)]
    assert gone and all(t.drawn[0][2].mean() > 0.9 for t in gone)  # wholly behind the board


def _through_h264(frames: list[np.ndarray], crf: int) -> list[np.ndarray]:
    import av

    h, w = frames[0].shape[:2]
    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt = w, h, "yuv420p"
    enc.time_base = Fraction(1, 30)
    enc.options = {"crf": str(crf), "preset": "veryfast"}
    packets = []
    for f in frames:
        packets += enc.encode(av.VideoFrame.from_ndarray(f, format="bgr24"))
    packets += enc.encode(None)
    dec = av.CodecContext.create("h264", "r")
    out = []
    for p in packets:
        out += [d.to_ndarray(format="bgr24") for d in dec.decode(p)]
    out += [d.to_ndarray(format="bgr24") for d in dec.decode(None)]
    return out


@pytest.mark.parametrize("crf", [14, 30])
def test_codes_read_back_through_h264(crf: int, t1_bgr: np.ndarray) -> None:
    picture = np.ascontiguousarray(t1_bgr[:720, :1280])
    indices = [0, 1, 2, 77, 1000, 4095]
    frames = [stamp(picture, i) for i in indices]
    assert [read_index(f) for f in _through_h264(frames, crf)] == indices


def test_frames_without_a_clean_code_read_as_none(t1_bgr: np.ndarray) -> None:
    picture = np.ascontiguousarray(t1_bgr[:720, :1280])
    assert read_index(np.zeros_like(picture)) is None  # livecam's black start frames
    assert read_index(picture) is None
    damaged = stamp(picture, 5)
    x0, y0, _, y1 = CODE_BOX_XYXY
    damaged[y0:y1, x0 + 60:x0 + 70] = 255 - damaged[y0:y1, x0 + 60:x0 + 70]  # flip one bit
    assert read_index(damaged) is None  # its complement bar catches it
    with pytest.raises(ValueError):
        stamp(picture, 1 << CODE_BITS)

"""Faces cut by the frame's edge, judged from their first visible pixel: through livecam's own
analysis and classic swap stages in this process (offline, every frame; the live runs are
test_leak_live.py), each edge's face is covered or swapped, never shown as it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.analysis.edges import (
    EdgeMemory,
    above_repeated_rows,
    cover_box,
    crosses_edge,
    edge_hits,
    edge_strips,
    on_face,
)
from livecam.analysis.second_look import (
    StripPlace,
    score_again,
    second_look_places,
    seen_again,
)
from livecam.core.boxes import meets_any
from livecam.core.types import Faces
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
    # two pieces per edge, the bottom's twice: mirrored, and its last row repeated
    assert len(strips) == 8 and all(s.image_bgr.shape == (720, 720, 3) for s in strips)
    bottom = [s for s in strips if s.offset_xy[1] == 360]
    assert len(bottom) == 4 and [s.repeated_below for s in bottom].count(360) == 2
    image[719, :, 1] = 200  # the last row: repeated below it in one of each piece's two
    rows = [s.image_bgr[360:, :, 1] for s in edge_strips(image) if s.offset_xy[1] == 360]
    assert sum(bool((r == 200).all()) for r in rows) == 2
    left = strips[0]
    ys, xs = np.nonzero(left.image_bgr[:, :, 0])
    # the real half holds the mark where the frame has it; the mirror beside it, outside
    assert (xs + left.offset_xy[0]).max() == 29 and (ys + left.offset_xy[1]).min() == 100
    assert (xs + left.offset_xy[0]).min() < 0
    assert crosses_edge(np.array([-50, 100, 40, 200], np.float32), 1280, 720)
    assert not crosses_edge(np.array([-90, 100, 2, 200], np.float32), 1280, 720)  # all out
    assert not crosses_edge(np.array([10, 100, 90, 200], np.float32), 1280, 720)  # inside


def _found(boxes: list[list[float]], scores: list[float]) -> list[tuple[Faces, np.ndarray]]:
    n = len(boxes)
    faces = Faces(boxes_xyxy=np.array(boxes, np.float32).reshape(n, 4),
                  scores=np.array(scores, np.float32),
                  keypoints_xy=np.zeros((n, 6, 2), np.float32),
                  track_ids=np.full(n, -1, np.int64))
    return [(faces, np.zeros(2, np.float32))]


def test_a_hit_in_the_repeated_rows_needs_most_of_its_box_above_them() -> None:
    """The repeated rows carry no face: the leak clips' backdrop, its last row repeated, made
    boxes straddling the edge (0.57-0.68 inside, scores 0.30-0.47) on every clip, and their
    frame code's bars small ones (0.31-0.41), covered where no face was; a face's upper part
    there lies mostly above it (0.74-1.0, the weakest that mattered 0.47)."""
    found = _found([[100.0, 200.0, 200.0, 300.0],   # 0.74 inside the 274 real rows
                    [100.0, 200.0, 200.0, 300.0],   # the same, weaker: the code's stripes
                    [100.0, 150.0, 400.0, 450.0],   # a backdrop's box: 0.41 inside
                    [100.0, 150.0, 400.0, 450.0]],  # the same, sure
                   [0.47, 0.41, 0.47, 0.55])[0][0]
    assert above_repeated_rows(found, 274).tolist() == [True, False, False, True]


def test_weak_edge_hits_need_half_a_box_inside_and_colour() -> None:
    """Before, every hit from 0.3 with 4 % inside was a face: t1's table edge mirrored at the
    bottom (0.47, 12-18 % inside) was covered on every frame of the group photo, and the leak
    clips' black-and-white frame code mirrored at the bottom (0.38) was covered, unreadable."""
    skin = np.full((720, 1280, 3), (90, 130, 190), np.uint8)  # BGR: a skin tone
    grey = np.full((720, 1280, 3), 128, np.uint8)
    mostly_out = [330.0, 690.0, 590.0, 950.0]  # 12 % inside the bottom edge
    half_in = [600.0, 620.0, 760.0, 780.0]
    assert edge_hits(_found([mostly_out], [0.47]), skin, 0.3) == []
    assert len(edge_hits(_found([mostly_out], [0.65]), skin, 0.3)) == 1  # a sure one stays
    assert len(edge_hits(_found([half_in], [0.4]), skin, 0.3)) == 1
    assert edge_hits(_found([half_in], [0.4]), grey, 0.3) == []
    assert len(edge_hits(_found([half_in], [0.7]), grey, 0.3)) == 1
    assert edge_hits(_found([half_in], [0.2]), skin, 0.3) == []


def test_the_glasses_on_the_table_at_the_bottom_edge_are_not_covered(
        clips: dict[str, LeakClip]) -> None:
    """t1's glasses lying on the table at the bottom edge (``still_6``), with the last row
    repeated below, score 0.63-0.73 as a face in the bottom strip, above its 0.5: before,
    the cover hid a 288x89 px patch of table on every frame, where no face was. A second
    look at the hit (the detector on the frame around it, three and four times its size
    across) does not find it again (0.00-0.40); the faces' hits it does (0.47-0.89)."""
    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState

    config = load_config(None, ["advanced.pipeline.realtime=false"])
    state = RuntimeState(active_identity="astro", identities=("astro",))
    analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
    stray: list[tuple[int, list[int]]] = []
    with analysis:
        for t, (image, truth) in enumerate(clips["still_6"].frames()):
            if t >= 4:
                break
            packet = analysis.process(Packet.from_frame(Frame(t, 0, image), state))
            stray += [(t, [round(float(v)) for v in box])
                      for box in packet.withheld.boxes_xyxy
                      if not meets_any(box.tolist(), truth.boxes_xyxy.tolist())]
    assert stray == []  # before: (t, [972, 631, 1260, 720]) on every frame, 288x89 px


def test_a_second_look_finds_a_face_again_and_maps_its_box_back() -> None:
    """The second look's pictures are squares about the hit, 2.5-5 times its size, whose
    pixels past the frame's edge repeat the edge's (as the bottom's repeated rows do); a
    detection in one counts where its box, mapped back to the frame, overlaps the hit, and
    the hit is found again where the pictures score 0.3 on average: the glasses on t1's table
    scored 0.53 in one picture of five and nothing in the others."""
    hit = [600.0, 660.0, 700.0, 760.0]  # straddling the bottom edge of a 1280x720 frame
    places = second_look_places(hit, 720, 1280)
    assert [(len(p.rows), len(p.cols), round(s * 192)) for p, s in places] == [
        (192, 192, 300), (192, 192, 400), (192, 192, 500), (192, 192, 250), (192, 192, 350)]
    place, scale = places[0]
    assert place.offset_xy.tolist() == [500.0, 560.0] and not place.kept
    assert place.rows.max() == 719 and (place.rows == 719).sum() > 30  # the last row repeats
    assert place.cols.tolist() == np.floor(500.0 + (np.arange(192) + 0.5) * scale).tolist()

    def detected(scores: list[float]) -> Callable[[StripPlace], Faces]:
        """A detector finding the hit with ``scores[k]`` in the k-th picture."""
        calls = iter(scores)

        def detect(p: StripPlace) -> Faces:
            k = [q.offset_xy.tolist() for q, _ in places].index(p.offset_xy.tolist())
            s = places[k][1]
            mapped = [(hit[0] - p.offset_xy[0]) / s, (hit[1] - p.offset_xy[1]) / s,
                      (hit[2] - p.offset_xy[0]) / s, (hit[3] - p.offset_xy[1]) / s]
            return _found([mapped, [0.0, 0.0, 20.0, 20.0]], [next(calls), 0.99])[0][0]

        return detect

    found = detected([0.6])(place)
    assert score_again(found, hit, place.offset_xy, scale) == pytest.approx(0.6)
    assert score_again(found[np.array([False, True])], hit, place.offset_xy, scale) == 0.0
    assert seen_again(detected([0.6, 0.6, 0.6]), hit, 720, 1280)  # decided after three
    assert not seen_again(detected([0.0] * 4), hit, 720, 1280)  # decided after four
    assert not seen_again(detected([0.0, 0.3, 0.0, 0.53, 0.0]), hit, 720, 1280)
    assert seen_again(detected([0.5, 0.2, 0.4, 0.0, 0.5]), hit, 720, 1280)


def test_an_edge_hits_cover_spans_the_sliver_along_the_edge() -> None:
    """A face entering at the right edge: the detector's box on its 12 px sliver is 71 px tall
    on a 206 px face (``slide_right``, frame 9), on its eyes, above the face's middle; the
    cover spans 40 % of the frame's height along the edge, most of the growth below the box,
    not across it, and leaves a face-sized box as it is. Before: three times the box, about
    its centre, which left the lower half of ``enter``'s face at 7 % in view (a 41 px box on
    a 212 px face) as it is."""
    box = cover_box([1237.0, 213.0, 1308.0, 284.0], 1280, 720)
    assert box.tolist() == pytest.approx([1237.0, 137.05, 1308.0, 425.05])
    enter = cover_box([-22.0, 214.0, 19.0, 255.0], 1280, 720)  # enter's face: y 214-426
    assert enter[1] <= 214.0 and enter[3] >= 0.92 * 426.0 + 0.08 * 214.0  # its core's bottom
    top = cover_box([640.0, -30.0, 700.0, 30.0], 1280, 720)
    assert top.tolist() == [526.0, -30.0, 814.0, 30.0]
    big = [400.0, 620.0, 750.0, 820.0]
    assert cover_box(big, 1280, 720).tolist() == big


def test_a_remembered_edge_hits_cover_reaches_further_in_as_it_ages() -> None:
    """A face entering goes on entering after its last hit: a hit remembered for ``age``
    frames covers 15 % of its along-edge size further into the frame per frame (before: the
    box as found, and ``slide_bottom``'s face showed above it two or three frames on)."""
    found = [600.0, 680.0, 660.0, 760.0]  # a sliver's hit at the bottom edge
    assert cover_box(found, 1280, 720).tolist() == [486.0, 680.0, 774.0, 760.0]
    older = cover_box(found, 1280, 720, age_frames=2)  # 2 x 15 % of its 288 px
    assert older.tolist() == pytest.approx([486.0, 593.6, 774.0, 760.0])
    assert cover_box(found, 1280, 720, age_frames=20).tolist() == [486.0, 392.0, 774.0, 760.0]
    left = cover_box([-40.0, 300.0, 40.0, 380.0], 1280, 720, age_frames=1)
    assert left.tolist() == pytest.approx([-40.0, 227.2, 83.2, 515.2])  # 43 px to the right
    memory = EdgeMemory(frames=8)
    hit = (np.array(found, np.float32), 0.5, np.zeros((6, 2), np.float32))
    assert [a for *_, a in memory.update([hit], 10, [], (1280, 720))] == [0]
    assert [a for *_, a in memory.update([], 13, [], (1280, 720))] == [3]


def test_a_face_sliding_in_from_the_bottom_is_covered_when_frames_are_dropped(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """Live mode under load processes every third frame or so. A face sliding in from the
    bottom (forehead and eyes first) leaked input frames 14 and 19 (32 and 58 % in view)
    with the mirrored bottom strip alone and the remembered hits' boxes as found (live table:
    20 of 89 face-frames in one run): nothing detected them, and the last hit's box lay below
    the face that had moved on."""
    for start in (1, 2):
        _, _, report = run_in_process(clips["slide_bottom"], photo, frames=26,
                                      only=range(start, 26, 3))
        assert report.faces_judged >= 5
        assert [(v.input_frame, round(v.visible, 2)) for v in report.leaked] == []


def test_an_edge_hit_on_a_face_already_there_is_dropped() -> None:
    """The hit's in-frame part lies on a followed face (its mirrored half outside makes the IoU
    small): remembered or fresh, it is that face, not a second one to cover (before: a stale
    hit covered part of the swapped face for 8 frames on ``slide_left``)."""
    hit = np.array([-137.0, 225.0, 29.0, 391.0], np.float32)
    face = np.array([-53.0, 195.0, 158.0, 404.0], np.float32)
    assert on_face(hit.tolist(), [face.tolist()], 1280, 720)
    assert not on_face(hit.tolist(), [[400.0, 195.0, 600.0, 404.0]], 1280, 720)
    memory = EdgeMemory(frames=8)
    kept = memory.update([(hit, 0.5, np.zeros((6, 2), np.float32))], 0, [], (1280, 720))
    assert len(kept) == 1
    assert memory.update([], 1, [], (1280, 720)) != []  # remembered while nothing is there
    assert memory.update([], 2, [face], (1280, 720)) == []  # the face is followed now
    assert not memory.remembered


def test_an_edge_hit_on_a_face_covered_without_a_mesh_is_kept() -> None:
    """A face covered as a box (a detection with no mesh yet) stays where it was detected;
    the edge hit on it is not returned while it is there, but is remembered, so its cover,
    reaching further in as it ages, takes over when the box is gone (before: forgotten, and
    ``slide_bottom``'s face showed above the stale box three frames on)."""
    hit = (np.array([600.0, 640.0, 700.0, 740.0], np.float32), 0.7,
           np.zeros((6, 2), np.float32))
    boxed = np.array([610.0, 640.0, 700.0, 730.0], np.float32)
    memory = EdgeMemory(frames=8)
    assert memory.update([hit], 16, [], (1280, 720), [boxed]) == []
    assert memory.remembered
    assert [age for *_, age in memory.update([], 19, [], (1280, 720))] == [3]


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
    (before: the held swap for ``advanced.swap.hold_frames``, 8 frames, on every hidden frame
    here)."""
    _, truths, report = run_in_process(clips["hidden"], photo, frames=26)
    hidden = {t for t, truth in enumerate(truths) if not len(truth.ids)}
    assert len(hidden) >= 8
    judged = [g for g in report.ghosts_judged if g.input_frame in hidden]
    assert judged
    assert [g for g in judged if g.ghost] == []


@pytest.mark.slow
def test_the_face_behind_stays_covered_while_two_faces_cross(clips: dict[str, LeakClip],
                                                              photo: Path) -> None:
    """Two people cross, the second in front: the one behind, lost from view, stays covered
    where it is predicted while the face in front (followed all along) is on top of it.
    Before: its cover was dropped as "found again" the moment its predicted box overlapped
    the face in front, and 38, 24 and 9 % of it showed as it is (input frames 30-32)."""
    _, _, report = run_in_process(clips["crossing"], photo, frames=40)
    assert report.faces_judged >= 70
    assert [(v.input_frame, round(v.visible, 2)) for v in report.leaked] == []


@pytest.mark.slow
def test_a_face_half_hidden_by_a_board_is_covered_not_swapped_onto_it(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """A board slides over the face: from the frame its detection turns weak (half of it or
    more hidden) the face is covered, so no swap is painted on the board. Before: the face
    mesh went on fitting the hidden face and its swap was painted on the board with 40 and
    50 % of the face hidden (input frames 9-10; 20-30 % hidden, frames 7-8, still are:
    the detector scores those 0.64-0.72, as strong as a face in view)."""
    _, truths, report = run_in_process(clips["hidden"], photo, frames=13)
    half = {t for t, truth in enumerate(truths)
            if len(truth.fractions) and float(truth.fractions[0]) < 0.65}
    assert half >= {9, 10, 11, 12}
    judged = [g for g in report.ghosts_judged if g.input_frame in half]
    assert judged
    assert [(g.input_frame, round(g.levels, 1)) for g in judged if g.ghost] == []


def test_a_face_entering_from_the_side_is_covered_from_its_first_sliver(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """A second person walks in from the left edge: at 7 % in view (frame 5) the detector's
    box on the sliver is 41 px on a 212 px face, on its eyes. Before, the cover (three times
    that box, about its centre) left the lower half of the sliver as it is (residual
    0.33-0.39, a leak)."""
    _, _, report = run_in_process(clips["enter"], photo, frames=8)
    entering = [v for v in report.verdicts if v.face_id == 2]
    assert [v.input_frame for v in entering] == [5, 6, 7]
    assert [(v.input_frame, round(v.residual, 2)) for v in report.leaked] == []



def test_a_face_sliding_in_from_the_left_is_covered_from_its_first_sliver(
        clips: dict[str, LeakClip], photo: Path) -> None:
    """``slide_left``'s face (t1's third person) scores nothing of 0.3 on the mirrored strips
    until 26 % of it is in view (input frame 12): covered from the frames its hair and face
    advance in over the left edge (:mod:`livecam.analysis.edge_entry`). Before: input frames
    9-11 (7-19 % in view) showed the real sliver (residual 0.00)."""
    _, _, report = run_in_process(clips["slide_left"], photo, frames=14)
    entering = [v.input_frame for v in report.verdicts if v.visible < 0.3]
    assert {9, 10, 11} <= set(entering)
    assert [(v.input_frame, round(v.visible, 2)) for v in report.leaked] == []


def _entry_hits(frames: list[np.ndarray]) -> list[int]:
    """The frames (positions in ``frames``) on which an :class:`EdgeEntry` fed them all in
    turn gives an edge hit."""
    from livecam.analysis.edge_entry import EdgeEntry

    watch = EdgeEntry()
    return [t for t, image in enumerate(frames) if watch.hits(image, t)]


def test_only_what_advances_in_over_a_side_edge_is_an_entry(
        clips: dict[str, LeakClip]) -> None:
    """A still scene (the ``t1`` photo with sensor noise, a face still at the left edge), an
    exposure change, a board over the whole picture, and a light blinking at the edge give no
    entry (once seen to blink); something advancing in over the left edge does, from its first
    frame, with a box across the edge on its rows."""
    from livecam.analysis.edge_entry import EdgeEntry

    for name in ("still_6", "cut_left"):
        frames = [image for _, (image, _) in zip(range(12), clips[name].frames(), strict=False)]
        brighter = cv2.add(frames[-1], np.full_like(frames[-1], 40))
        board = np.full_like(frames[-1], 30)
        assert _entry_hits([*frames, brighter, brighter, board, board]) == []
    image = np.full((720, 1280, 3), 90, np.uint8)
    image[::2, ::3] = 120  # a textured backdrop
    blink = []
    for t in range(12):
        frame = image.copy()
        if t % 2:
            frame[300:420, :20] = 250  # a light at the edge, on every other frame
        blink.append(frame)
    assert _entry_hits(blink) == [1]  # taken for an entry once, then known to blink
    watch = EdgeEntry()
    assert watch.hits(image, 0) == []
    hits = []
    for t, depth in enumerate((8, 20, 32), start=1):
        sliver = image.copy()
        sliver[300:420, :depth] = (60, 110, 170)  # a skin-coloured body advancing in
        hits.append(watch.hits(sliver, t))
    assert all(len(h) == 1 for h in hits)
    # gone, and in again a second later (live mode looping a clip, a few frames followed a
    # pass: before, the second entry was taken for flicker and the face's sliver showed)
    assert watch.hits(image, 10) == []
    again = image.copy()
    again[300:420, :20] = (60, 110, 170)
    assert len(watch.hits(again, 40)) == 1
    box = hits[0][0][0]
    assert box[0] < 0 < box[2] and box[1] <= 300 and box[3] >= 416
    assert crosses_edge(box, 1280, 720)

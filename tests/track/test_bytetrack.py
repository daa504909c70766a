"""Plain numpy: given these detections, expect these track ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from livecam.core.boxes import box_iou
from livecam.core.errors import ConfigError
from livecam.track import ByteTracker, ByteTrackSettings, iou_matrix, load_bytetrack_settings
from livecam.track.bytetrack import iou_matrix_numpy

REPO = Path(__file__).resolve().parents[2]


def _box(cx: float, cy: float, size: float = 80.0) -> list[float]:
    return [cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2]


def _ids_by_x(tracker: ByteTracker, centres: list[tuple[float, float]],
              scores: list[float] | None = None,
              frame_size_px: tuple[int, int] | None = None) -> dict[int, int]:
    """Update with boxes at ``centres``; map detection index -> track id."""
    boxes = np.array([_box(x, y) for x, y in centres]).reshape(-1, 4)
    result = tracker.update(boxes, np.array(scores or [0.9] * len(centres)),
                            frame_size_px=frame_size_px)
    return {int(d): int(t) for d, t in zip(result.det_indices, result.track_ids, strict=True)}


def test_iou_matrix_values() -> None:
    a = np.array([[0, 0, 10, 10]], float)
    b = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]], float)
    np.testing.assert_allclose(iou_matrix(a, b), [[1.0, 50 / 150, 0.0]])
    assert iou_matrix(np.zeros((0, 4)), b).shape == (0, 3)


def test_first_frame_tracks_start_at_once_and_keep_ids_while_moving() -> None:
    tracker = ByteTracker()
    first = _ids_by_x(tracker, [(100, 100), (400, 100)])
    assert sorted(first.values()) == [1, 2]
    for step in range(1, 30):
        ids = _ids_by_x(tracker, [(100 + 4 * step, 100), (400 - 4 * step, 100)])
        assert ids == first


def test_a_new_face_is_unconfirmed_for_one_frame_then_gets_the_next_id() -> None:
    tracker = ByteTracker()
    _ids_by_x(tracker, [(100, 100)])
    assert _ids_by_x(tracker, [(100, 100), (500, 300)]) == {0: 1}  # unconfirmed: not output
    assert _ids_by_x(tracker, [(100, 100), (500, 300)]) == {0: 1, 1: 2}


def test_a_track_born_this_frame_is_reported_as_pending_with_its_detection() -> None:
    tracker = ByteTracker()
    _ids_by_x(tracker, [(100, 100)])
    result = tracker.update(np.array([_box(100, 100), _box(500, 300)]), np.array([0.9, 0.9]))
    assert result.track_ids.tolist() == [1]
    assert result.pending_track_ids.tolist() == [2]
    assert result.pending_det_indices.tolist() == [1]
    confirmed = tracker.update(np.array([_box(500, 302)]), np.array([0.9]))
    assert confirmed.track_ids.tolist() == [2] and confirmed.is_new.tolist() == [True]
    assert confirmed.pending_track_ids.tolist() == []


def test_a_one_frame_false_hit_never_becomes_a_track() -> None:
    tracker = ByteTracker()
    _ids_by_x(tracker, [(100, 100)])
    _ids_by_x(tracker, [(100, 100), (500, 300)])
    for _ in range(5):
        assert _ids_by_x(tracker, [(100, 100)]) == {0: 1}
    assert _ids_by_x(tracker, [(100, 100), (800, 300)]) == {0: 1}
    assert _ids_by_x(tracker, [(100, 100), (800, 300)]) == {0: 1, 1: 3}


def test_weak_detections_keep_a_track_alive_but_never_start_one() -> None:
    tracker = ByteTracker()
    _ids_by_x(tracker, [(100, 100)])
    # half-hidden: score 0.4 is below the high threshold but above the low one
    for step in range(5):
        assert _ids_by_x(tracker, [(100 + step, 100)], [0.4]) == {0: 1}
    fresh = ByteTracker()
    for _ in range(5):
        assert _ids_by_x(fresh, [(300, 300)], [0.4]) == {}
    assert _ids_by_x(fresh, [(300, 300)], [0.1]) == {}


def test_a_hidden_face_comes_back_with_its_id_along_its_predicted_path() -> None:
    tracker = ByteTracker()
    for step in range(10):
        _ids_by_x(tracker, [(100 + 5 * step, 200)])
    for _step in range(10, 25):  # hidden for 15 frames while it keeps moving
        assert _ids_by_x(tracker, []) == {}
    assert _ids_by_x(tracker, [(100 + 5 * 25, 200)]) == {0: 1}


def test_a_face_leaving_the_frame_keeps_its_id_when_it_comes_back_where_it_left() -> None:
    tracker = ByteTracker()
    for step in range(10):  # walking right at 20 px/frame, out of a 640 px frame
        assert _ids_by_x(tracker, [(460 + 20 * step, 200)]) == {0: 1}
    for _ in range(30):
        assert _ids_by_x(tracker, [], [], frame_size_px=(640, 480)) == {}
    assert _ids_by_x(tracker, [(630, 200)]) == {0: 1}
    # ByteTrack's original behaviour: the lost track coasts on out of sight
    coasting = ByteTracker(ByteTrackSettings(stop_lost_tracks_at_frame_edge=False))
    for step in range(10):
        _ids_by_x(coasting, [(460 + 20 * step, 200)])
    for _ in range(30):
        _ids_by_x(coasting, [], [], frame_size_px=(640, 480))
    assert _ids_by_x(coasting, [(630, 200)]) == {}


def test_a_track_lost_longer_than_the_buffer_is_forgotten() -> None:
    tracker = ByteTracker(ByteTrackSettings(lost_track_buffer_frames=5))
    _ids_by_x(tracker, [(100, 100)])
    _ids_by_x(tracker, [(100, 100)])
    for _ in range(7):
        _ids_by_x(tracker, [])
    _ids_by_x(tracker, [(100, 100)])
    assert _ids_by_x(tracker, [(100, 100)]) == {0: 2}


def test_ids_are_per_tracker_instance() -> None:
    a, b = ByteTracker(), ByteTracker()
    assert _ids_by_x(a, [(100, 100)]) == {0: 1}
    assert _ids_by_x(b, [(100, 100)]) == {0: 1}
    a.reset()
    assert _ids_by_x(a, [(300, 100)]) == {0: 1}


def test_update_does_not_write_into_its_inputs() -> None:
    tracker = ByteTracker()
    boxes = np.array([_box(100, 100)], np.float32)
    scores = np.array([0.9], np.float32)
    before = boxes.copy(), scores.copy()
    tracker.update(boxes, scores)
    tracker.update(boxes, scores)
    np.testing.assert_array_equal(boxes, before[0])
    np.testing.assert_array_equal(scores, before[1])


def test_mismatched_lengths_are_a_value_error() -> None:
    with pytest.raises(ValueError):
        ByteTracker().update(np.zeros((2, 4)), np.zeros(3))


def test_bytetrack_yaml_documents_every_setting_with_its_default() -> None:
    text = (REPO / "trackers" / "bytetrack.yaml").read_text()
    data = yaml.safe_load(text)
    assert load_bytetrack_settings(REPO / "trackers" / "bytetrack.yaml") == ByteTrackSettings()
    assert set(data) == set(ByteTrackSettings.__dataclass_fields__)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith("#") and ":" in line:
            assert lines[i - 1].startswith("#"), f"undocumented: {line}"


def test_bad_tracker_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_bytetrack_settings(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("high_score_thresold: 0.5\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_bytetrack_settings(bad)
    bad.write_text("high_score_threshold: 0.2\nlow_score_threshold: 0.5\n")
    with pytest.raises(ConfigError, match="must not exceed"):
        load_bytetrack_settings(bad)


def _awkward_boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 4) boxes: ordinary ones, and flipped, empty, touching, nested, huge, NaN, inf."""
    xy = rng.uniform(0, 200, (n, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(-5, 80, (n, 2))], axis=1)
    kinds = rng.integers(0, 8, n)
    boxes[kinds == 1, 2] = boxes[kinds == 1, 0]  # zero width
    boxes[kinds == 2] = boxes[kinds == 2][:, [2, 3, 0, 1]]  # flipped corners
    boxes[kinds == 3, 0] = np.nan
    boxes[kinds == 4, 3] = np.inf
    boxes[kinds == 5] = np.round(boxes[kinds == 5] / 20) * 20  # shared edges
    boxes[kinds == 6] *= 1e7
    return boxes


def test_plain_float_iou_gives_numpys_bits_on_awkward_boxes() -> None:
    """iou_matrix's Python path for a few pairs (the tracker's one-face case, overlaps)
    against its numpy path, bit for bit, NaN and infinite boxes included."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        a = _awkward_boxes(rng, int(rng.integers(1, 4)))
        b = _awkward_boxes(rng, int(rng.integers(1, 4)))
        small = iou_matrix(a, b)
        assert small.shape == (len(a), len(b)) and small.dtype == np.float64
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, inf * 0
            np.testing.assert_array_equal(small, iou_matrix_numpy(a, b))
        np.testing.assert_array_equal(np.array([[box_iou(x, y) for y in b.tolist()]
                                                for x in a.tolist()]), small)


def _stream(tracker: ByteTracker, seed: int) -> list[tuple]:
    """150 frames of 1-3 faces that hide now and then and come back some way off, with
    scores from weak to sure: one face's match sits near the IoU x score threshold often."""
    rng = np.random.default_rng(seed)
    n = 1 + seed % 3
    pos = rng.uniform(100, 700, (n, 2))
    out = []
    for _ in range(150):
        pos += rng.normal(0, 4, (n, 2))
        present = rng.random(n) > 0.25
        jump = rng.normal(0, 25, (n, 2)) * ~present[:, None]
        pos += jump  # a face that was hidden comes back elsewhere
        boxes = np.array([_box(x, y, 90) for x, y in pos])[present] + rng.normal(0, 2, (
            int(present.sum()), 4))
        scores = rng.uniform(0.35, 1.0, int(present.sum()))
        r = tracker.update(boxes, scores, frame_size_px=(800, 800),
                           steps=1 + int(rng.random() < 0.2))
        out.append((r.track_ids, r.det_indices, r.boxes_xyxy, r.is_new, r.pending_track_ids,
                    [(t.track_id, t.box_xyxy, t.frames_lost) for t in tracker.lost_tracks()],
                    tracker.velocities_px()))
    return out


def test_the_one_face_and_few_faces_paths_track_as_numpy_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracker with every IoU in numpy (as before the plain-float paths) gives the same
    ids, boxes and velocities, bit for bit, on streams that go between one face and three."""
    from livecam.track import bytetrack

    fast = [_stream(ByteTracker(), seed) for seed in range(6)]
    monkeypatch.setattr(bytetrack, "PAIRS_IN_PYTHON", 0)
    monkeypatch.setattr(bytetrack, "box_iou", lambda a, b: float(
        iou_matrix_numpy(np.array([a]), np.array([b]))[0, 0]))
    slow = [_stream(ByteTracker(), seed) for seed in range(6)]
    for f, s in zip(fast, slow, strict=True):
        for frame_f, frame_s in zip(f, s, strict=True):
            for x, y in zip(frame_f[:5], frame_s[:5], strict=True):
                np.testing.assert_array_equal(x, y)
            assert [(i, n) for i, _, n in frame_f[5]] == [(i, n) for i, _, n in frame_s[5]]
            for (_, bf, _), (_, bs, _) in zip(frame_f[5], frame_s[5], strict=True):
                np.testing.assert_array_equal(bf, bs)
            assert frame_f[6] == frame_s[6]


def test_float32_boxes_track_as_their_float64_copies_do() -> None:
    """update and iou_matrix read float32 boxes as Python floats rather than casting them
    (numpy's cast lets go of the GIL): the same ids, boxes and IoUs, bit for bit."""
    rng = np.random.default_rng(8)
    a32 = _awkward_boxes(rng, 3).astype(np.float32)
    b32 = _awkward_boxes(rng, 2).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for a, b in ((a32[:1], b32[:1]), (a32, b32), (a32, np.tile(b32, (4, 1)))):
            np.testing.assert_array_equal(iou_matrix(a, b), iou_matrix(
                a.astype(np.float64), b.astype(np.float64)))
    t32, t64 = ByteTracker(), ByteTracker()
    pos = np.array([[200.0, 300.0], [500.0, 300.0]])
    for i in range(40):
        pos += rng.normal(0, 6, pos.shape)
        boxes = np.concatenate([pos - 45.3, pos + 45.3], 1)[: 1 + (i // 10) % 2]
        scores = rng.uniform(0.4, 1.0, len(boxes)).astype(np.float32)
        r32 = t32.update(boxes.astype(np.float32), scores)
        r64 = t64.update(boxes.astype(np.float32).astype(np.float64), scores.astype(np.float64))
        for x, y in zip((r32.track_ids, r32.det_indices, r32.boxes_xyxy, r32.is_new),
                        (r64.track_ids, r64.det_indices, r64.boxes_xyxy, r64.is_new),
                        strict=True):
            np.testing.assert_array_equal(x, y)
        assert t32.velocities_px() == t64.velocities_px()


def test_assign_without_the_solver_gives_the_solvers_pairs() -> None:
    """Where no row and no column has two acceptable partners, _assign skips the solver:
    the same pairs and leftovers as the Hungarian solver's, in its order."""
    from scipy.optimize import linear_sum_assignment

    from livecam.track.bytetrack import _assign

    rng = np.random.default_rng(7)
    for _ in range(3000):
        rows, cols = (int(v) for v in rng.integers(0, 7, 2))
        sim = rng.uniform(0, 1, (rows, cols)) * (rng.uniform(0, 1, (rows, cols))
                                                 < rng.uniform(0, 0.6))
        if sim.size and rng.uniform() < 0.05:
            sim[rng.integers(rows), rng.integers(cols)] = np.nan
        min_sim = float(rng.choice([1e-6, 0.1, 0.5, 0.8]))
        pairs, free_r, free_c = _assign(sim, min_sim)
        cost = np.where(sim >= min_sim, 1.0 - sim, 1e6)
        r, c = linear_sum_assignment(cost)
        want = [(int(i), int(j)) for i, j in zip(r, c, strict=True) if cost[i, j] < 1e5]
        assert pairs == want
        assert free_r == [i for i in range(rows) if i not in {p[0] for p in want}]
        assert free_c == [j for j in range(cols) if j not in {p[1] for p in want}]

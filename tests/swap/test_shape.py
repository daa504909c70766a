"""Shape transfer on real face meshes: what the offsets move, and what they must leave alone."""

from __future__ import annotations

import numpy as np

from livecam.analysis import geometry
from livecam.swap.mesh import MeshTopology
from livecam.swap.shape import NeutralShape, ShapeTransfer, as_xyz, similarity_3d
from tests.helpers.swap_eval import RealFace


def _xyz(face: RealFace) -> np.ndarray:
    return as_xyz(face.landmarks_xy, face.landmarks_z)


def test_offsets_move_the_inside_and_keep_outline_and_openings(
        by_label: dict[str, RealFace], topology: MeshTopology) -> None:
    shape = ShapeTransfer(topology)
    target, source = _xyz(by_label["astronaut"]), _xyz(by_label["t1-2"])
    off = shape.offsets(target, source, strength=1.0, mouth_weight=1.0, move_eyes=True)
    width = geometry.face_width_px(target[:, :2].astype(np.float32))
    # the interior really moves (a few % of the face width), the outline not at all
    assert np.linalg.norm(off[:, :2], axis=1).max() > 0.02 * width
    assert np.abs(off[topology.face_oval]).max() == 0.0
    # lips and each eye move as one piece: their opening is exactly the target's
    for region in (topology.lips, topology.eye_right, topology.eye_left):
        assert np.ptp(off[region], axis=0).max() < 1e-9
    shaped = (target + off).astype(np.float32)
    assert geometry.mouth_openness(shaped[:, :2]) == geometry.mouth_openness(
        target[:, :2].astype(np.float32))
    # held in place when asked: the kept mouth interior and kept eyes are the target's pixels
    held = shape.offsets(target, source, strength=1.0, mouth_weight=0.0, move_eyes=False)
    for region in (topology.lips, topology.eye_right, topology.eye_left):
        assert np.abs(held[region]).max() == 0.0
    # no transfer asked, or the same person: nothing moves
    assert np.abs(shape.offsets(target, source, strength=0.0, mouth_weight=1.0,
                                move_eyes=True)).max() == 0.0
    assert np.abs(shape.offsets(target, target, strength=1.0, mouth_weight=1.0,
                                move_eyes=True)).max() < 1e-6 * width


def test_offsets_follow_a_turned_head(by_label: dict[str, RealFace],
                                      topology: MeshTopology) -> None:
    """Aligning in 3D makes the offsets turn with the head instead of fighting the turn."""
    shape = ShapeTransfer(topology)
    target, source = _xyz(by_label["astronaut"]), _xyz(by_label["t1-2"])
    angle = np.radians(25)
    turn = np.array([[np.cos(angle), 0, np.sin(angle)], [0, 1, 0],
                     [-np.sin(angle), 0, np.cos(angle)]])
    centre = target.mean(axis=0)
    turned = (target - centre) @ turn.T + centre
    off = shape.offsets(target, source, strength=1.0, mouth_weight=1.0, move_eyes=True)
    off_turned = shape.offsets(turned, source, strength=1.0, mouth_weight=1.0, move_eyes=True)
    assert np.abs(off_turned - off @ turn.T).max() < 1e-6 * np.abs(off).max() + 1e-6


def test_similarity_3d_recovers_a_known_transform(by_label: dict[str, RealFace]) -> None:
    points = _xyz(by_label["hanks"])
    angle = np.radians(30)
    rot = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0],
                    [0, 0, 1]])
    moved = 1.7 * points @ rot.T + np.array([5.0, -3.0, 2.0])
    r, s, t = similarity_3d(points, moved)
    assert np.allclose(r, rot, atol=1e-9) and abs(s - 1.7) < 1e-9
    assert np.allclose(t, [5.0, -3.0, 2.0], atol=1e-6)


def test_neutral_shape_lets_expressions_through(by_label: dict[str, RealFace],
                                                topology: MeshTopology) -> None:
    """The streamer raises the brows for a moment while moving the head: the shaped brows must
    rise as much (offsets come from the slow neutral shape, not the frame), where offsets
    taken from the frame itself would hold them down at the source's brows."""
    shape = ShapeTransfer(topology)
    base, source = _xyz(by_label["astronaut"]), _xyz(by_label["t1-2"])
    raise_px = 6.0
    neutral = NeutralShape()
    rise_neutral = rise_frame = 0.0
    for k in range(150):
        live = base + np.array([2.0 * np.sin(k / 9), 1.5 * np.cos(k / 7), 0.0])
        raised = k >= 140
        if raised:
            live = live.copy()
            live[topology.brows, 1] -= raise_px
        pose_neutral = neutral.update(live)
        shaped = live + shape.offsets(pose_neutral, source, strength=1.0, mouth_weight=1.0,
                                      move_eyes=True)
        frame_only = live + shape.offsets(live, source, strength=1.0, mouth_weight=1.0,
                                          move_eyes=True)
        brows_y = shaped[topology.brows, 1].mean() - live[:, 1].mean()
        frame_y = frame_only[topology.brows, 1].mean() - live[:, 1].mean()
        if k == 139:
            before, before_frame = brows_y, frame_y
        if k == 140:
            rise_neutral, rise_frame = before - brows_y, before_frame - frame_y
    # brows rise: nearly all of the streamer's raise with the neutral shape, little without
    assert rise_neutral > 0.85 * raise_px, rise_neutral
    assert rise_frame < 0.5 * raise_px, rise_frame

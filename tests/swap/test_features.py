"""The streamer's kept regions: where they are read, shown and how they blend."""

from __future__ import annotations

import numpy as np

from livecam.swap import features
from livecam.swap.mesh import MeshTopology


def test_loops_are_the_meshs_hole_rims(topology: MeshTopology) -> None:
    assert tuple(topology.eye_right) == features.EYE_RIGHT_LOOP
    assert tuple(topology.eye_left) == features.EYE_LEFT_LOOP
    assert tuple(topology.mouth_inner) == features.MOUTH_INNER_LOOP
    assert tuple(topology.face_oval) == features.FACE_OVAL_LOOP


def test_kept_region_is_read_where_the_streamer_is_and_shown_where_the_shape_moved_it() -> None:
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (80, 100, 3), dtype=np.uint8)
    live = np.array([[30, 30], [50, 25], [70, 30], [50, 45]], np.float32)  # a diamond "eye"
    shown = live + np.array([6, -4], np.float32)  # the shape transfer moved the eye
    region = features.kept_region("eye", shown, live)
    assert np.allclose(region.shift_xy, [-6, 4])
    face = np.zeros((60, 80, 3), np.uint8)  # the swapped face over box (10, 10, 90, 70)
    out = features.keep_streamer(face.copy(), frame, (10, 10, 90, 70), [region], soft_px=0.0)
    inside = features.region_alpha(shown, (10, 10), (60, 80), 0.0) > 0.99
    ys, xs = np.nonzero(inside)
    # each pixel shown at p holds the streamer's pixel at p + shift
    assert (out[ys, xs] == frame[ys + 10 + 4, xs + 10 - 6]).all()
    assert (out[~(features.region_alpha(shown, (10, 10), (60, 80), 0.0) > 0)] == 0).all()


def test_soft_edge_is_centred_on_the_rim() -> None:
    loop = np.array([[20, 20], [60, 20], [60, 60], [20, 60]], np.float32)
    alpha = features.region_alpha(loop, (0, 0), (80, 80), 2.0)
    assert alpha[40, 40] > 0.999 and alpha[40, 5] < 1e-3
    assert 0.3 < alpha[40, 20] < 0.7  # half way on the rim itself

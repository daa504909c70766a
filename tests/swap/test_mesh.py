"""Mesh topology: triangles from mediapipe's edges, hole fills, mirror map."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from livecam.swap.mesh import MeshTopology
from livecam.swap.mirror_map import MIRROR
from tests.helpers.swap_eval import RealFace


def _edge_counts(triangles: np.ndarray) -> Counter[tuple[int, int]]:
    counts: Counter[tuple[int, int]] = Counter()
    for tri in triangles.tolist():
        for a, b in itertools.combinations(sorted(tri), 2):
            counts[(a, b)] += 1
    return counts


def test_triangle_counts_match_the_canonical_face_model(topology: MeshTopology) -> None:
    assert topology.triangles.shape == (898, 3)
    assert int((topology.hole_of_triangle == 0).sum()) == 852
    # 16-point eye rims give 14 triangles each, the 20-point inner lip 18
    assert [int((topology.hole_of_triangle == k).sum()) for k in (1, 2, 3)] == [14, 14, 18]
    assert len({tuple(sorted(t)) for t in topology.triangles.tolist()}) == 898
    assert topology.triangles.min() >= 0 and topology.triangles.max() < 468


def test_filled_mesh_is_a_disc_bounded_only_by_the_face_oval(topology: MeshTopology) -> None:
    counts = _edge_counts(topology.triangles)
    boundary = {e for e, n in counts.items() if n == 1}
    assert max(counts.values()) == 2  # every interior edge is shared by exactly two triangles
    oval = topology.face_oval.tolist()
    oval_edges = {tuple(sorted((oval[i], oval[(i + 1) % len(oval)]))) for i in range(len(oval))}
    assert boundary == oval_edges  # eye and mouth holes are closed


def test_mirror_map_is_an_involution_that_mirrors_a_frontal_face(
        by_label: dict[str, RealFace]) -> None:
    mirror = np.asarray(MIRROR)
    assert sorted(mirror.tolist()) == list(range(468))
    assert (mirror[mirror] == np.arange(468)).all()
    # on a near-frontal real face (t1-2, not the photo the map was derived from) the mirrored
    # point of each landmark sits where its reflection about the face midline falls
    face = by_label["t1-2"]
    xy = face.landmarks_xy.astype(np.float64)
    eye_r, eye_l = xy[33], xy[263]
    axis = (eye_l - eye_r) / np.linalg.norm(eye_l - eye_r)
    mid = xy[[1, 4, 6, 168, 152]].mean(axis=0)
    along = (xy - mid) @ axis
    reflected = xy - 2 * along[:, None] * axis
    err = np.linalg.norm(reflected[mirror] - xy, axis=1)
    face_w = np.linalg.norm(xy[234] - xy[454])
    assert np.median(err) < 0.06 * face_w

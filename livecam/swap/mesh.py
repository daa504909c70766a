"""The face-mesh topology the classic swap warps with: triangles, hole fills, named contours.

MediaPipe ships the 468-point mesh as *edges* only (``FACEMESH_TESSELATION``). The triangles are
the 3-cliques of that edge graph (854), less the two cliques that are not faces (their three
edges each belong to three cliques): 852 surface triangles. The surface has holes at both eyes
and inside the lips; they are filled here by a zig-zag strip between the upper and lower lid (or
lip) from one corner to the other, so the eyes and the mouth are warped too: 898 triangles in all,
the same count as MediaPipe's canonical face model.

Building the topology imports mediapipe (about a second): do it once in ``open()``/identity load
and pass the :class:`MeshTopology` around; it is immutable and safe to share between threads.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]

# Corner points of the mesh holes (MediaPipe indices); each hole loop contains two of them.
_HOLE_CORNERS = {"eye_right": (33, 133), "eye_left": (362, 263), "mouth": (78, 308)}

@dataclass(frozen=True)
class MeshTopology:
    """Index arrays into the 468-point mesh.

    - ``triangles``: (T, 3) int32, T = 898 (852 surface + 46 hole fills).
    - ``hole_of_triangle``: (T,) int32: 0 surface, 1 right eye, 2 left eye, 3 mouth.
    - ``face_oval``: (36,) int32 ordered loop of the face outline.
    - ``eye_right`` / ``eye_left`` / ``mouth_inner``: ordered loops of the hole rims.
    - ``brows``: indices of the eyebrow points (the forehead-less mask cuts above them).
    - ``lips``: indices of all lip points, outer and inner contours (moved as one piece by the
      shape transfer).
    """

    triangles: IntArray
    hole_of_triangle: IntArray
    face_oval: IntArray
    eye_right: IntArray
    eye_left: IntArray
    mouth_inner: IntArray
    brows: IntArray
    lips: IntArray

    @property
    def n_triangles(self) -> int:
        return len(self.triangles)


def _ordered_loop(edges: Iterable[tuple[int, int]]) -> list[int]:
    adj: dict[int, list[int]] = defaultdict(list)
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    start = min(adj)
    loop, prev, cur = [start], -1, start
    while True:
        nxt = [n for n in adj[cur] if n != prev and n != start and n not in loop]
        if not nxt:
            break
        prev, cur = cur, nxt[0]
        loop.append(cur)
    return loop


def _boundary_loops(triangles: list[tuple[int, int, int]]) -> list[list[int]]:
    counts: Counter[tuple[int, int]] = Counter()
    for tri in triangles:
        for a, b in itertools.combinations(sorted(tri), 2):
            counts[(a, b)] += 1
    boundary = [e for e, n in counts.items() if n == 1]
    adj: dict[int, set[int]] = defaultdict(set)
    for a, b in boundary:
        adj[a].add(b)
        adj[b].add(a)
    loops, seen = [], set()
    for start in sorted(adj):
        if start in seen:
            continue
        group = {start}
        stack = [start]
        while stack:
            for n in adj[stack.pop()]:
                if n not in group:
                    group.add(n)
                    stack.append(n)
        seen |= group
        loops.append(_ordered_loop((a, b) for a, b in boundary if a in group))
    return loops


def _fill_hole(loop: list[int], corners: tuple[int, int]) -> list[tuple[int, int, int]]:
    """Zig-zag strip between the two sides of ``loop`` from one corner to the other."""
    n = len(loop)
    i0 = loop.index(corners[0])
    rot = loop[i0:] + loop[:i0]
    i1 = rot.index(corners[1])
    side_a = rot[: i1 + 1]  # corner0 .. corner1 one way round
    side_b = [rot[0], *rot[i1:][::-1]]  # corner0 .. corner1 the other way
    assert len(side_a) + len(side_b) - 2 == n
    tris: list[tuple[int, int, int]] = []
    ia, ib = 0, 0
    while ia < len(side_a) - 1 or ib < len(side_b) - 1:
        # advance the side that is relatively further behind, so the strip stays balanced
        frac_a = ia / (len(side_a) - 1)
        frac_b = ib / (len(side_b) - 1)
        if ib >= len(side_b) - 1 or (ia < len(side_a) - 1 and frac_a <= frac_b):
            tris.append((side_a[ia], side_a[ia + 1], side_b[ib]))
            ia += 1
        else:
            tris.append((side_a[ia], side_b[ib + 1], side_b[ib]))
            ib += 1
    # the two sides meet at both corners, so the first/last triangles can be degenerate
    return [t for t in tris if len(set(t)) == 3]


def _face_mesh_connections() -> Any:
    """mediapipe's ``python/solutions/face_mesh_connections.py`` (frozensets of landmark
    pairs, no imports) as a module of its own: importing it as ``mediapipe.python.solutions``
    would first import mediapipe's whole framework
    (:func:`livecam.analysis.litert.mediapipe_dir`)."""
    from livecam.analysis.litert import mediapipe_dir

    path = mediapipe_dir() / "python" / "solutions" / "face_mesh_connections.py"
    spec = importlib.util.spec_from_file_location("_livecam_face_mesh_connections", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_topology() -> MeshTopology:
    """Derive the triangle list and contours from mediapipe's edge sets (its
    ``face_mesh_connections``, plain data, read without importing mediapipe itself)."""
    fmc = _face_mesh_connections()

    edges = [tuple(sorted(e)) for e in fmc.FACEMESH_TESSELATION]
    adj: dict[int, set[int]] = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    cliques = sorted(
        {tuple(sorted((a, b, c))) for a, b in edges for c in adj[a] & adj[b]}
    )
    counts: Counter[tuple[int, int]] = Counter()
    for tri in cliques:
        for e in itertools.combinations(tri, 2):
            counts[e] += 1
    # a 3-clique whose three edges each belong to three cliques spans two real faces
    surface = [
        (t[0], t[1], t[2])
        for t in cliques
        if not all(counts[e] == 3 for e in itertools.combinations(t, 2))
    ]
    holes: dict[str, list[int]] = {}
    for loop in _boundary_loops(surface):
        for name, corners in _HOLE_CORNERS.items():
            if corners[0] in loop and corners[1] in loop:
                holes[name] = loop
    missing = set(_HOLE_CORNERS) - set(holes)
    if missing:
        raise RuntimeError(f"face mesh topology: holes not found: {sorted(missing)}")
    tris = list(surface)
    kinds = [0] * len(surface)
    for kind, name in enumerate(("eye_right", "eye_left", "mouth"), start=1):
        fill = _fill_hole(holes[name], _HOLE_CORNERS[name])
        tris += fill
        kinds += [kind] * len(fill)
    brows = sorted({i for e in fmc.FACEMESH_LEFT_EYEBROW | fmc.FACEMESH_RIGHT_EYEBROW for i in e})
    return MeshTopology(
        triangles=np.asarray(tris, dtype=np.int32),
        hole_of_triangle=np.asarray(kinds, dtype=np.int32),
        face_oval=np.asarray(_ordered_loop(fmc.FACEMESH_FACE_OVAL), dtype=np.int32),
        eye_right=np.asarray(holes["eye_right"], dtype=np.int32),
        eye_left=np.asarray(holes["eye_left"], dtype=np.int32),
        mouth_inner=np.asarray(holes["mouth"], dtype=np.int32),
        brows=np.asarray(brows, dtype=np.int32),
        lips=np.asarray(sorted({i for e in fmc.FACEMESH_LIPS for i in e}), dtype=np.int32),
    )

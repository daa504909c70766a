"""mediapipe's files are read without importing mediapipe (livecam/analysis/litert.py): its
import costs about half a second and 40-50 MB resident (``scripts/bench_big_image.py``), for a
package livecam only takes model files and one module of plain data from."""

from __future__ import annotations

import os
import subprocess
import sys

from livecam.swap.mesh import build_topology


def test_the_models_and_the_mesh_topology_load_without_importing_mediapipe() -> None:
    """Before: ``open_mediapipe_model`` imported mediapipe to find its folder, and
    ``build_topology`` imported it for ``face_mesh_connections``."""
    code = ("import sys\n"
            "from livecam.analysis.litert import open_mediapipe_model\n"
            "from livecam.swap.mesh import build_topology\n"
            "net = open_mediapipe_model('face_landmark', 'face_landmark.tflite', 1)\n"
            "assert len(build_topology().triangles) > 800\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mediapipe'))\n")
    env = {k: v for k, v in os.environ.items() if k != "LIVECAM_MEDIAPIPE_MODULES"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_topology_read_from_the_file_is_mediapipe_s() -> None:
    from mediapipe.python.solutions import face_mesh_connections as fmc

    topology = build_topology()
    used = {tuple(sorted(e)) for e in fmc.FACEMESH_TESSELATION}
    surface = topology.triangles[topology.hole_of_triangle == 0].tolist()
    edges = {tuple(sorted(p)) for t in surface for p in ((t[0], t[1]), (t[1], t[2]), (t[0], t[2]))}
    assert edges <= used and len(edges) > 0.9 * len(used)

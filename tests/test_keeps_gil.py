"""The per-frame Python of the face follower and of the GPU swap stage keeps the GIL.

With many streams in one process every release of the GIL is a hand-over among the streams'
threads (``scripts/bench_gil_streams.py``). ``scripts/count_gil_releases.py`` runs each on
1080p frames without a GPU (fake networks, and the hub's host work in place of the hub) under
gdb, with a breakpoint on ``PyEval_SaveThread``, and names the numpy call behind each
release. gdb is a system package (``apt-get install gdb``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import collections
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("gdb") is None,
                                 reason="gdb is not installed (apt-get install gdb)")]

FRAMES = 5


def count(stage: str, faces: int, frames: int) -> collections.Counter[str]:
    """``scripts/count_gil_releases.py``'s count (scripts/ is no package on sys.path when
    `pytest` runs as README says: the file itself is loaded)."""
    path = Path(__file__).parents[1] / "scripts" / "count_gil_releases.py"
    spec = importlib.util.spec_from_file_location("count_gil_releases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    counts: collections.Counter[str] = module.count(stage, faces, frames)
    return counts


@pytest.mark.parametrize("faces", [1, 4])
def test_the_follower_never_lets_go_of_the_gil(faces: int) -> None:
    assert dict(count("follower", faces, FRAMES)) == {}


@pytest.mark.parametrize("faces", [1, 4])
def test_the_swap_stage_lets_go_only_to_copy_pictures(faces: int) -> None:
    """Each face's swap kept for ``hold``: copies of a face's box, long enough that the other
    streams should run meanwhile (the swapped frame is handed on in its buffer, not copied;
    the buffer that takes its place is one handed out before, not a new allocation).
    Nothing else: the faces' keypoints, kept eyes and mouth, latents and the tick's face rows
    are a few hundred numbers each."""
    counts = count("swap", faces, FRAMES)
    assert set(counts) == {"array_copy"}, dict(counts)
    assert counts["array_copy"] <= FRAMES * (1 + faces)

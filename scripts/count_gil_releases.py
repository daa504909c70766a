"""Count where livecam's per-frame Python lets go of the GIL, per frame, by numpy entry point.

    python -m scripts.count_gil_releases [--stage follower|swap] [--frames 20] [--faces 1]
                                         [--json count_gil_releases.json]

With many streams in one process every release of the GIL is a hand-over among the threads
(``scripts/bench_gil_streams.py``: the follower keeps 0.28x of its one-thread throughput on 16
threads). ``--stage follower`` runs ``FaceFollower.follow`` (1080p frames, the fake networks of
``bench_follower_python.py``, no GPU); ``--stage swap`` runs the GPU swap stage's ``submit`` and
``collect`` with the hub's host work (``bench_swap_python.py``'s ``RowsHub``, no GPU). Either
runs under gdb with a breakpoint on ``PyEval_SaveThread`` (the C call behind every release)
for ``--frames`` frames after a warm-up, and tallies each release by the nearest numpy entry
point in its C backtrace. Needs gdb (Linux). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: C functions of numpy and CPython that name what a Python line did, nearest first
ENTRIES = {
    "array_assign_subscript": "a[...] = b (copy into a view)",
    "PyUFunc_GenericReduction": "ufunc.reduce / min / max / sum",
    "array_array": "np.array(...)",
    "array_asarray": "np.asarray(..., dtype)",
    "array_argmax": "argmax",
    "array_argmin": "argmin",
    "array_concatenate": "np.concatenate / stack",
    "array_astype": "astype",
    "array_subscript": "a[index] (fancy index)",
    "ufunc_generic_fastcall": "ufunc with a cast (mixed dtypes)",
    "array_copy": "copy",
}

CHILD = """
import os, sys
import numpy as np
{setup}
import math
for i in range(60):
    step(i)
math.gamma(2.0)  # gdb starts counting here
for i in range(60, 60 + {frames}):
    step(i)
math.lgamma(2.0)  # and stops here
os.write(1, b"DONE\\n")
"""

STAGES = {
    "follower": """
import scripts.bench_follower_python as b
from livecam.analysis.follower import FaceFollower
from livecam.config.analysis import AnalysisConfig
scene = b.FakeScene({faces}, 200)
image = np.zeros((b.FRAME_WH[1], b.FRAME_WH[0], 3), np.uint8)
follower = FaceFollower(AnalysisConfig(max_faces=6), b.FakeNetworks(scene), b.FakeSearch(),
                        edge_search=b.FakeEdgeSearch())
follower.open()
def step(i):
    scene.frame = i % 200
    follower.follow(image, i)
""",
    "swap": """
import scripts.bench_swap_python as b
from livecam.gpupipe.stage import GpuSwapStage
packets = b.scene_packets({faces}, 200)
stage = GpuSwapStage(b.RowsHub(), keep_eyes=True, keep_mouth=True,
                     device_frame=lambda image: (None, None))
stage.open()
stage.prepare(*b.FRAME_WH)
def step(i):
    stage.submit(packets[i % 200])
    assert stage.collect(1.0) is not None
""",
}

#: The breakpoint on releases is armed only while the frames run (the imports and the warm-up
#: would take minutes under it), by breakpoints on the two markers the child calls.
GDB = """set pagination off
set breakpoint pending on
break PyEval_SaveThread
commands
silent
bt 12
continue
end
disable 1
break math_gamma
commands
silent
printf "COUNTING\\n"
enable 1
continue
end
break math_lgamma
commands
silent
disable 1
printf "STOPPED\\n"
continue
end
run
"""


def tally(text: str) -> collections.Counter[str]:
    """The releases gdb printed (it prints only those between the markers), by the nearest
    known entry point of each backtrace."""
    counts: collections.Counter[str] = collections.Counter()
    for trace in text.split("\n#0 ")[1:]:
        names = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\w+)", "#0 " + trace, re.M)
        counts[next((n for n in names if n in ENTRIES), "other")] += 1
    return counts


def count(stage: str, faces: int, frames: int) -> collections.Counter[str]:
    """Releases of the GIL in ``frames`` frames of ``stage`` (a key of :data:`STAGES`) with
    ``faces`` faces, by numpy entry point (the script's own markers left out)."""
    with tempfile.TemporaryDirectory() as tmp:
        child, cmds = Path(tmp) / "child.py", Path(tmp) / "gdb.txt"
        setup = STAGES[stage].format(faces=faces)
        child.write_text(textwrap.dedent(CHILD.format(
            setup=setup, frames=frames)))
        cmds.write_text(GDB)
        run = subprocess.run(["gdb", "-q", "-batch", "-x", str(cmds), "--args", sys.executable,
                              str(child)], capture_output=True, text=True, timeout=900,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    if not all(f"{word}\n" in run.stdout for word in ("COUNTING", "STOPPED", "DONE")):
        raise RuntimeError("the counted run did not finish, or gdb never counted (no "
                           f"breakpoint on its markers):\n{run.stdout[-2000:]}"
                           f"\n{run.stderr[-2000:]}")
    return tally(run.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=sorted(STAGES), default="follower",
                        help="whose per-frame Python: the face follower's or the GPU swap "
                        "stage's (default: follower)")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--faces", type=int, default=1)
    parser.add_argument("--json", type=Path, default=Path("count_gil_releases.json"))
    args = parser.parse_args()
    counts = count(args.stage, args.faces, args.frames)
    total = sum(counts.values())
    where = {"follower": "FaceFollower.follow", "swap": "GpuSwapStage.submit + collect"}
    print(f"GIL releases in {where[args.stage]}, {args.faces} face(s), {args.frames} frames: "
          f"{total / args.frames:.1f} a frame")
    print("| numpy entry point | what | a frame |")
    print("|---|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {ENTRIES.get(name, '')} | {n / args.frames:.1f} |")
    args.json.write_text(json.dumps({"stage": args.stage, "frames": args.frames,
                                     "faces": args.faces,
                                     "per_frame": {k: v / args.frames
                                                   for k, v in counts.items()}}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

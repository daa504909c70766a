"""Live mode's drops replayed offline: leaked face-frames and ghost frames of one leak clip per
drop pattern, deterministic (unlike ``scripts.leak_table``, whose live runs show whichever input
frames the load lets through).

    python -m scripts.leak_replay --clip hidden [--json leak_replay.json] [--set KEY=VALUE ...]

Each pattern runs the clip through livecam's analysis and classic swap stages in this process
(``tests.helpers.leak_run.run_in_process``), following only the pattern's input frames, as live
mode under load does: every frame; every 2nd, 3rd and 4th frame from each offset; three random
40 % of the frames (seeded). The identity is skimage's astronaut, as in the leak measure. To
compare with another checkout, run the same command there (``PYTHONPATH=DIR``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np


def patterns(n_frames: int) -> dict[str, set[int] | None]:
    """The drop patterns by name: the input frames each follows (None: every frame)."""
    out: dict[str, set[int] | None] = {"every": None}
    for k in (2, 3, 4):
        for s in range(k):
            out[f"1in{k}@{s}"] = set(range(s, n_frames, k))
    rng = np.random.default_rng(7)
    for r in range(3):
        out[f"rand{r}"] = {t for t in range(n_frames) if rng.random() < 0.4}
    return out


def main() -> None:
    from skimage import data

    from tests.helpers.leak_clips import leak_clips
    from tests.helpers.leak_run import run_in_process

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", required=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    clip = leak_clips()[args.clip]
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        photo = Path(tmp) / "astronaut.png"
        cv2.imwrite(str(photo), cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR))
        t0 = time.perf_counter()
        for name, only in patterns(clip.n_frames).items():
            _, _, report = run_in_process(clip, photo, *args.set, only=only)
            rows[name] = {
                "leaks": [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
                          for v in report.leaked],
                "ghost_inputs": sorted({g.input_frame for g in report.ghosts_judged if g.ghost}),
                "judged": report.faces_judged}
        wall = time.perf_counter() - t0
    print(f"{'pattern':>8} | judged | leaks (input frame, share in view, residual) | ghosts")
    for name, r in rows.items():
        print(f"{name:>8} | {r['judged']:6d} | {r['leaks']} | {r['ghost_inputs']}")
    total = sum(len(r["leaks"]) for r in rows.values())
    print(f"{args.clip}: {total} leaked face-frames in {len(rows)} patterns ({wall:.0f} s)")
    if args.json is not None:
        args.json.write_text(json.dumps({"clip": args.clip, "set": args.set, "wall_s": wall,
                                         "patterns": rows}, indent=1))


if __name__ == "__main__":
    main()

"""Live mode's drops replayed offline: leaked face-frames and ghost frames of one leak clip per
drop pattern, deterministic (unlike ``scripts.leak_table``, whose live runs show whichever input
frames the load lets through).

    python -m scripts.leak_replay --clip hidden [--looped] [--irregular N] [--starts]
                                  [--encoded] [--json leak_replay.json] [--set KEY=VALUE ...]

Each pattern runs the clip through livecam's analysis and classic swap stages in this process
(``tests.helpers.leak_run.run_in_process``), following only the pattern's input frames, as live
mode under load does: every frame; every 2nd, 3rd and 4th frame from each offset; three random
40 % of the frames (seeded). ``--looped``: instead, the clip played twice as the live measure
plays it (the frame index runs on), every ``k``-th frame from each offset for ``k`` 1-8 (36
patterns). ``--irregular N``: instead, N patterns over the clip played twice, each from frame 0
(a live run's first frame) with gaps of 1-4 frames drawn at random (seeds 100 on).
``--starts``: instead, the clip once, followed from each frame 1-14 (a camera's stream starting
with the face already partly hidden; a file in live mode always starts at frame 0), every
``k``-th frame (1-8) on (112 patterns). ``--encoded``:
the clip's frames H.264-encoded and decoded, as the live measure feeds them. The identity is
skimage's astronaut, as in the leak measure. To compare with another checkout, run the same
command there (``PYTHONPATH=DIR``).
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


def looped_patterns(n_frames: int) -> dict[str, set[int]]:
    """Every ``k``-th frame from each offset, ``k`` 1-8, over the clip played twice."""
    return {f"1in{k}@{s}": set(range(s, 2 * n_frames, k)) for k in range(1, 9) for s in range(k)}


def start_patterns(n_frames: int) -> dict[str, set[int]]:
    """The clip followed from frame ``s`` (1-14: a camera's first frame with the face already
    partly hidden), every ``k``-th frame (1-8) on, one pass."""
    return {f"from{s}/{k}": set(range(s, n_frames, k)) for s in range(1, 15) for k in range(1, 9)}


def irregular_patterns(n_frames: int, count: int) -> dict[str, set[int]]:
    """``count`` patterns over the clip played twice: from frame 0, gaps of 1-4 frames drawn
    with seeds 100 on."""
    out: dict[str, set[int]] = {}
    for seed in range(100, 100 + count):
        rng = np.random.default_rng(seed)
        t, follow = 0, set()
        while t < 2 * n_frames:
            follow.add(t)
            t += int(rng.integers(1, 5))
        out[f"seed{seed}"] = follow
    return out


def main() -> None:
    from skimage import data

    from tests.helpers.leak_clips import leak_clips
    from tests.helpers.leak_run import run_in_process

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", required=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--looped", action="store_true",
                        help="every k-th frame from each offset, k 1-8, the clip played twice")
    parser.add_argument("--irregular", type=int, default=0, metavar="N",
                        help="N seeded patterns from frame 0, gaps 1-4, the clip played twice")
    parser.add_argument("--starts", action="store_true",
                        help="from each frame 1-14, every k-th frame (1-8), one pass")
    parser.add_argument("--encoded", action="store_true",
                        help="the clip's frames H.264-encoded and decoded, as live")
    args = parser.parse_args()
    clip = leak_clips()[args.clip]
    chosen: dict[str, set[int] | None] = {}
    if args.looped:
        chosen.update(looped_patterns(clip.n_frames))
    if args.irregular:
        chosen.update(irregular_patterns(clip.n_frames, args.irregular))
    passes = 2 if chosen else 1
    if args.starts:
        if chosen:
            parser.error("--starts plays the clip once: not with --looped or --irregular")
        chosen.update(start_patterns(clip.n_frames))
    chosen = chosen or patterns(clip.n_frames)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        photo = Path(tmp) / "astronaut.png"
        cv2.imwrite(str(photo), cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR))
        t0 = time.perf_counter()
        for name, only in chosen.items():
            _, _, report = run_in_process(clip, photo, *args.set, only=only,
                                          encoded=args.encoded, passes=passes)
            rows[name] = {
                "leaks": [(v.input_frame, round(v.visible, 2), round(v.residual, 3))
                          for v in report.leaked],
                "ghost_inputs": sorted({g.input_frame for g in report.ghosts_judged if g.ghost}),
                "ghost_levels": [round(g.levels, 2) for g in report.ghosts],
                "judged": report.faces_judged}
        wall = time.perf_counter() - t0
    print(f"{'pattern':>8} | judged | leaks (input frame, share in view, residual) | ghosts")
    for name, r in rows.items():
        print(f"{name:>8} | {r['judged']:6d} | {r['leaks']} | {r['ghost_inputs']}"
              + (f" {r['ghost_levels']}" if r["ghost_levels"] else ""))
    total = sum(len(r["leaks"]) for r in rows.values())
    ghosts = sum(len(r["ghost_levels"]) for r in rows.values())
    print(f"{args.clip}: {total} leaked face-frames, {ghosts} ghost frames in {len(rows)} "
          f"patterns ({wall:.0f} s)")
    if args.json is not None:
        args.json.write_text(json.dumps({"clip": args.clip, "set": args.set, "wall_s": wall,
                                         "looped": args.looped, "irregular": args.irregular,
                                         "encoded": args.encoded, "patterns": rows}, indent=1))


if __name__ == "__main__":
    main()

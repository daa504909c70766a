"""The leak table: leaked face-frames per clip, ``livecam run`` in live mode, default vs ``real``.

    python scripts/leak_table.py [--json leak_table.json] [--clips still_2 enter ...]
                                 [--settings default real] [--set KEY=VALUE ...]

Each clip of ``tests.helpers.leak_clips`` (real faces from insightface's t1 photo, true boxes
known, frame index drawn in a corner) is written as H.264 and run through ``livecam run
--input file:CLIP --output file:OUT --identity astro`` exactly as a user runs it, in live mode
(the file paced at 30 fps like a camera; frames dropped and repeated as the load dictates),
once per setting:

- ``default``: the shipped config (``swap.unswappable: hold``);
- ``real``: ``--set swap.unswappable=real`` (livecam's behaviour before fail-closed);
- ``cover``: ``--set swap.unswappable=cover``;
- ``before``: the shipped config of the checkout given with ``--before DIR`` (e.g. the main
  branch before fail-closed: ``git worktree add /tmp/before <commit>``).

The output is judged from its pixels against the input frame each output frame shows
(``tests.helpers.leak_judge``). *leaks* counts leaked face-frames at or after each face's
first full view (the goal: 0); *before* those before it (a face still entering); the
*lowest residual* of a counted face-frame says how close the weakest swap or cover came to the
judge's threshold (docs/fail-closed.md: the live minimum of its calibration).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

SETTINGS = {"default": (), "real": ("swap.unswappable=real",),
            "cover": ("swap.unswappable=cover",), "before": ()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="leak_table.json")
    parser.add_argument("--clips", nargs="*", help="clip names (default: all)")
    parser.add_argument("--settings", nargs="*", default=["default", "real"],
                        choices=sorted(SETTINGS))
    parser.add_argument("--set", dest="extra", action="append", default=[],
                        metavar="KEY=VALUE", help="one more --set for every run")
    parser.add_argument("--workdir", help="keep clips and outputs here (default: a temp dir)")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="a livecam checkout to run for the `before` setting")
    args = parser.parse_args()
    if "before" in args.settings and args.before is None:
        parser.error("--settings before needs --before DIR")

    from tests.helpers.leak_clips import leak_clips
    from tests.helpers.leak_run import LeakBench

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="leak-"))
    bench = LeakBench(root)
    bench.add_identity()
    benches = {s: bench for s in args.settings}
    if args.before is not None:
        benches["before"] = LeakBench(root / "before", livecam_path=args.before)
        benches["before"].add_identity()
    clips = leak_clips()
    names = args.clips or list(clips)
    rows = []
    t_start = time.perf_counter()
    for name in names:
        for setting in args.settings:
            m = benches[setting].measure(clips[name], *SETTINGS[setting], *args.extra)
            r = m.report
            row = {"clip": name, "setting": setting, "wall_s": round(m.wall_s, 1), **r.summary()}
            rows.append(row)
            low = r.min_counted_residual
            print(f"{name:>14} {setting:>8}: leaks {r.leaks_counted:>4} (before full view "
                  f"{r.leaks_before_full_view}), judged {r.faces_judged}, lowest residual "
                  f"{'-' if low is None else f'{low:.3f}'}, output "
                  f"{r.output_frames} frames showing {r.distinct_inputs} inputs, "
                  f"{m.wall_s:.1f} s", flush=True)
    print(f"\nleaked face-frames, livecam run in live mode ({time.perf_counter() - t_start:.0f} s"
          f" in all; work dir {root})")
    print(f"{'clip':>14} | " + " | ".join(f"{s:>20}" for s in args.settings))
    print(f"{'':>14} | " + " | ".join(f"{'leaks/judged (before)':>20}" for _ in args.settings))
    for name in names:
        cells = []
        for setting in args.settings:
            row = next(r for r in rows if r["clip"] == name and r["setting"] == setting)
            cells.append(f"{row['leaks']:>5}/{row['face_frames_judged']:<5} "
                         f"({row['leaks_before_full_view']})".rjust(20))
        print(f"{name:>14} | " + " | ".join(cells))
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump({"settings": {s: list(SETTINGS[s]) for s in args.settings},
                   "before": str(args.before) if args.before else None,
                   "extra": args.extra, "runs": rows}, fh, indent=2)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

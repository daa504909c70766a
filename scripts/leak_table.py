"""The leak table: leaked face-frames per clip, ``livecam run`` in live mode, default vs ``real``.

    python -m scripts.leak_table [--json leak_table.json] [--clips still_2 enter ...]
                                 [--settings default real] [--set KEY=VALUE ...] [--gpu]

Each clip of ``tests.helpers.leak_clips`` (real faces from insightface's t1 photo, true boxes
known, frame index drawn in a corner) is written as H.264 and run through ``livecam run
--input file:CLIP --output file:OUT --identity astro`` exactly as a user runs it, in live mode
(the file paced at 30 fps like a camera; frames dropped and repeated as the load dictates),
once per setting:

- ``default``: the shipped config (``advanced.swap.unswappable: hold``);
- ``real``: ``--set advanced.swap.unswappable=real`` (livecam's behaviour before fail-closed);
- ``cover``: ``--set advanced.swap.unswappable=cover``;
- ``before``: the shipped config of the checkout given with ``--before DIR`` (e.g. the main
  branch before fail-closed: ``git worktree add /tmp/before <commit>``).

``--gpu``: the GPU path (``swap.mode=neural``, ``advanced.gpu.pipeline=always``) with stand-in
inswapper_128 and w600k_r50 models (``tests.helpers.standins``, installed into the run's
scratch home as ``livecam models import`` would): on a CUDA machine the GPU pipeline, here the
same program on the CPU (slow).

The output is judged from its pixels against the input frame each output frame shows
(``tests.helpers.leak_judge``). *leaks* counts leaked face-frames, every face from its first
visible pixel (the goal: 0); *partial* those of a face only partly seen (cut by an edge,
entering, half hidden); *ghosts* output frames that paint a hidden face's swap on what hides it
(the goal: 0); *covered* visible face-frames shown covered instead of swapped (fail closed; a
measure of false covers). The *lowest residual* of a counted face-frame says how close the
weakest swap or cover came to the judge's threshold (docs/fail-closed.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

SETTINGS = {"default": (), "real": ("advanced.swap.unswappable=real",),
            "cover": ("advanced.swap.unswappable=cover",), "before": ()}


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
    parser.add_argument("--gpu", action="store_true",
                        help="the GPU path: neural swap with stand-in models, "
                             "advanced.gpu.pipeline")
    args = parser.parse_args()
    if "before" in args.settings and args.before is None:
        parser.error("--settings before needs --before DIR")

    from tests.helpers.leak_clips import leak_clips
    from tests.helpers.leak_run import LeakBench

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="leak-"))
    if args.gpu:
        from tests.helpers.standins import install_standin_models

        models_dir, manifests_dir = install_standin_models(root / "standins")
        args.extra = [f"advanced.models.dir={models_dir}",
                      f"advanced.models.manifests_dir={manifests_dir}",
                      "swap.mode=neural", "advanced.gpu.pipeline=always", *args.extra]
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
            print(f"{name:>14} {setting:>8}: leaks {r.leaks_counted:>4} (partly seen "
                  f"{r.leaks_partial}), ghost frames {r.ghost_frames}, covered {r.covered}, "
                  f"judged {r.faces_judged} (unjudged slivers {r.unjudged}), lowest residual "
                  f"{'-' if low is None else f'{low:.3f}'}, output "
                  f"{r.output_frames} frames showing {r.distinct_inputs} inputs, "
                  f"{m.wall_s:.1f} s", flush=True)
    print(f"\nleaked face-frames, livecam run in live mode ({time.perf_counter() - t_start:.0f} s"
          f" in all; work dir {root})")
    print(f"{'clip':>14} | " + " | ".join(f"{s:>30}" for s in args.settings))
    print(f"{'':>14} | " + " | ".join(f"{'leaks/judged (partial) ghosts':>30}"
                                      for _ in args.settings))
    for name in names:
        cells = []
        for setting in args.settings:
            row = next(r for r in rows if r["clip"] == name and r["setting"] == setting)
            cells.append(f"{row['leaks']:>5}/{row['face_frames_judged']:<5} "
                         f"({row['leaks_partial']}) {row['ghost_frames']:>4}".rjust(30))
        print(f"{name:>14} | " + " | ".join(cells))
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump({"settings": {s: list(SETTINGS[s]) for s in args.settings},
                   "before": str(args.before) if args.before else None,
                   "gpu": args.gpu, "extra": args.extra, "runs": rows}, fh, indent=2)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

"""Covers where no face is: frames of each leak clip whose analysis withholds a box that touches
no face of the clip's truth (offline, every frame; a blurred patch the viewer sees for nothing).

    python -m scripts.stray_covers [--clips still_2 enter ...] [--json stray_covers.json]
                                   [--set KEY=VALUE ...]

Runs livecam's analysis stage as ``livecam run`` builds it over each clip's frames (rendered,
not encoded), every frame in order, and counts the frames with a withheld box (a cover) that
shares no area with any face box of the truth (every face from its first visible pixel). A
cover on something entering before its face does (hair, a shoulder) counts too. Public analysis
API only, so it measures another checkout too: ``PYTHONPATH=/path/to/before python -m
scripts.stray_covers``. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def main() -> None:
    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.boxes import meets_any
    from livecam.core.types import Frame, Packet, RuntimeState
    from tests.helpers.leak_clips import leak_clips

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", nargs="*", help="clip names (default: all)")
    parser.add_argument("--json", type=Path, default=Path("stray_covers.json"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    clips = leak_clips()
    rows: dict[str, dict[str, Any]] = {}
    state = RuntimeState(active_identity="astro", identities=("astro",))
    t0 = time.perf_counter()
    for name in args.clips or list(clips):
        clip = clips[name]
        config = load_config(None, ["advanced.pipeline.realtime=false", *clip.settings,
                                    *args.set])
        analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
        stray: list[tuple[int, list[int]]] = []
        with analysis:
            for t, (image, truth) in enumerate(clip.frames()):
                packet = analysis.process(Packet.from_frame(Frame(t, 0, image), state))
                faces = truth.boxes_xyxy.reshape(-1, 4).tolist()
                stray += [(t, [round(float(v)) for v in box])
                          for box in packet.withheld.boxes_xyxy
                          if not meets_any(box.tolist(), faces)]
        rows[name] = {"frames": clip.n_frames,
                      "frames_with_stray_cover": len({t for t, _ in stray}),
                      "stray": stray}
    wall = time.perf_counter() - t0
    print(f"{'clip':>14} | frames | frames with a cover on no face | first (frame, box)")
    for name, r in rows.items():
        print(f"{name:>14} | {r['frames']:6d} | {r['frames_with_stray_cover']:30d} | "
              f"{r['stray'][:3]}")
    total = sum(r["frames_with_stray_cover"] for r in rows.values())
    print(f"{total} frames with a cover on no face in {len(rows)} clips ({wall:.0f} s)")
    args.json.write_text(json.dumps({"set": args.set, "wall_s": wall, "clips": rows},
                                    indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

"""What the faces' looks cost the follower (``livecam/analysis/occluders.py``): ms per face and
frame of :meth:`Advancing.update`, on leak clips' faces (their true boxes), offline.

    python -m scripts.bench_occluders [--json bench_occluders.json] [--repeat 3]

Each clip's frames are rendered once, then each frame's faces are looked at ``--repeat``
times over the clip (a fresh :class:`Advancing` each pass, so the looks change as in a run).
Prints a table (median and 90th percentile per face) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

CLIPS = ("still_2", "still_6", "hidden", "turn")


def main() -> None:
    from livecam.analysis.occluders import Advancing
    from tests.helpers.leak_clips import leak_clips

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=Path("bench_occluders.json"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    clips = leak_clips()
    rows: dict[str, dict[str, float]] = {}
    print(f"{'clip':>10} | faces | per face: median ms | p90 ms")
    for name in CLIPS:
        frames = [(image, [tuple(b) for b in truth.boxes_xyxy.reshape(-1, 4).tolist()])
                  for image, truth in clips[name].frames()]
        per_face: list[float] = []
        for _ in range(args.repeat):
            watch = Advancing()
            for image, boxes in frames:
                if not boxes:
                    continue
                ids = list(range(len(boxes)))
                t = time.perf_counter_ns()
                watch.update(image, ids, boxes, set(ids))
                per_face.append((time.perf_counter_ns() - t) / 1e6 / len(boxes))
        faces = max(len(b) for _, b in frames)
        rows[name] = {"faces": faces, "median_ms": float(np.median(per_face)),
                      "p90_ms": float(np.percentile(per_face, 90))}
        print(f"{name:>10} | {faces:5d} | {rows[name]['median_ms']:19.3f} | "
              f"{rows[name]['p90_ms']:.3f}")
    args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

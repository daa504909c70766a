"""The face follower's edge step per frame on a leak clip, offline: print a table, write JSON.

    python -m scripts.bench_edges [--clip still_6] [--frames 60] [--json bench_edges.json]

Runs the analysis stage as ``livecam run`` builds it (offline: every frame, in order) over the
clip's frames and reports the follower's ``edges`` timing (the mirrored edge strips, the
bottom's repeated-row pictures and their second look) and ``total``, median and mean over the
frames after the first (the first also searches every tile). Public analysis API only, so it
measures another checkout too: ``PYTHONPATH=/path/to/before python -m scripts.bench_edges``;
on a loaded host, alternate the two (ABAB) and compare pairs.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> None:
    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet
    from tests.helpers.leak_clips import leak_clips

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", default="still_6")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    clip = leak_clips()[args.clip]
    config = load_config(None, ["advanced.pipeline.realtime=false", *clip.settings])
    stage = build_stages(config.analysis, fps=config.capture.fps)[0]
    edges: list[float] = []
    total: list[float] = []
    stage.open()
    try:
        for t, (image, _) in enumerate(clip.frames()):
            if t >= args.frames:
                break
            stage.process(Packet.from_frame(Frame(t, 0, image)))
            timings = getattr(stage, "last_timings_ms", {})
            if t > 0:
                edges.append(float(timings.get("edges", 0.0)))
                total.append(float(timings.get("total", 0.0)))
    finally:
        stage.close()
    row = {"clip": args.clip, "frames": len(edges),
           "edges_median_ms": statistics.median(edges), "edges_mean_ms": statistics.fmean(edges),
           "total_median_ms": statistics.median(total), "total_mean_ms": statistics.fmean(total)}
    print(f"{'clip':>10} | frames | edges median | edges mean | total median | total mean")
    print(f"{row['clip']:>10} | {row['frames']:6d} | {row['edges_median_ms']:9.1f} ms "
          f"| {row['edges_mean_ms']:7.1f} ms | {row['total_median_ms']:9.1f} ms "
          f"| {row['total_mean_ms']:7.1f} ms")
    if args.json is not None:
        args.json.write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()

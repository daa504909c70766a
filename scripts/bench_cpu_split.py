"""Where the CPU's milliseconds go, per frame: the analysis stage's own split and the classic
swap's steps, on bench_swap's 720p clips (1 and 4 faces), offline, one thread.

- analysis: the follower's ``last_timings_ms`` (wall ms a frame: detect, search, edges, mesh,
  track, smooth, select, total) and the stage's CPU (process time) a frame;
- swap: CPU ms a frame and a face of each step of the classic swap (the functions below wrapped
  with a process-time counter; a step's time includes the steps it calls).

    python -m scripts.bench_cpu_split --frames 100 --json cpu_split.json
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

#: (module, attribute path) of the swap's steps counted
SWAP_STEPS = (
    ("livecam.swap.stage", "ClassicSwapStage.process"),
    ("livecam.swap.classic", "ClassicFaceSwapper.swap_into"),
    ("livecam.swap.warp", "DenseWarper.warp"),
    ("livecam.swap.classic", "ClassicFaceSwapper._outer_mask"),
    ("livecam.swap.accessories", "dark_accessories"),
    ("livecam.swap.accessories", "worn_and_glasses"),
    ("livecam.swap.classic", "ClassicFaceSwapper._colour"),
    ("livecam.swap.colour", "lab_transfer"),
    ("livecam.swap.colour", "apply_lab_transfer"),
    ("livecam.swap.sharpness", "match_sharpness"),
    ("livecam.swap.features", "keep_streamer"),
    ("livecam.swap.blend", "paste_back_into"),
    ("livecam.swap.cover", "FaceCover.remember"),
)


def count_cpu(spent: dict[str, float]) -> None:
    """Wrap each of :data:`SWAP_STEPS` so its process time adds up in ``spent``."""
    import importlib

    for module_name, path in SWAP_STEPS:
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        inner = getattr(owner, name)

        def counted(*args: Any, _inner: Callable[..., Any] = inner, _key: str = path,
                    **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent[_key] += time.process_time() - t0

        setattr(owner, name, counted)


def split(n_faces: int, n_frames: int, identities: Any,
          spent: dict[str, float]) -> dict[str, Any]:
    """One clip's split; ``spent`` is the dict :func:`count_cpu` adds the swap's steps to."""
    from livecam.analysis import build_stages
    from livecam.app import build_swap_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState
    from scripts.bench_swap import make_frames

    frames = make_frames((1280, 720), n_faces, n_frames)
    state = RuntimeState(active_identity="src", identities=("src",))
    config = load_config(None, ["advanced.pipeline.realtime=false"])
    config = replace(config, analysis=replace(config.analysis, max_faces=max(
        n_faces, config.analysis.max_faces)))
    analysis = build_stages(config.analysis, fps=config.capture.fps)
    (swap,) = build_swap_stages(config, identities)
    walls: dict[str, list[float]] = collections.defaultdict(list)
    cpu_analysis = []
    packets = []
    for stage in (*analysis, swap):
        stage.open()
    try:
        for i, image in enumerate(frames):
            packet = Packet.from_frame(Frame(i, time.perf_counter_ns(), image), state)
            t0 = time.process_time()
            for stage in analysis:
                packet = stage.process(packet)
            cpu_analysis.append(time.process_time() - t0)
            for key, ms in getattr(analysis[-1], "last_timings_ms", {}).items():
                walls[key].append(ms)
            packets.append(packet)
        for packet in packets[:5]:  # warm
            swap.process(packet)
        spent.clear()
        for packet in packets:
            swap.process(packet)
    finally:
        for stage in (*analysis, swap):
            stage.close()
    faces = sum(len(p.faces) for p in packets)
    return {
        "faces": n_faces, "frames": n_frames, "faces_swapped": faces,
        "analysis_cpu_ms": 1e3 * float(np.median(cpu_analysis[5:])),
        "analysis_wall_ms": {k: float(np.sum(v)) / n_frames for k, v in walls.items()},
        "swap_cpu_ms_frame": {k: 1e3 * v / n_frames for k, v in spent.items()},
        "swap_cpu_ms_face": {k: 1e3 * v / max(faces, 1) for k, v in spent.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from livecam.identity import IdentityCollection
    from livecam.subcommands.demo import source_identity

    identities = IdentityCollection({"src": replace(source_identity(), name="src")})
    spent_by_step: dict[str, float] = collections.defaultdict(float)
    count_cpu(spent_by_step)
    rows = []
    for n_faces in (1, 4):
        spent_by_step.clear()
        rows.append(split(n_faces, args.frames, identities, spent_by_step))
        row = rows[-1]
        print(f"{n_faces} face(s) 720p: analysis CPU {row['analysis_cpu_ms']:.1f} ms a frame "
              "(median); its own split, wall ms a frame (mean):")
        print("  " + ", ".join(f"{k} {v:.2f}" for k, v in row["analysis_wall_ms"].items()))
        total = row["swap_cpu_ms_frame"].get("ClassicSwapStage.process", float("nan"))
        print(f"  swap CPU {total:.1f} ms a frame; by step (ms a face, share of the stage):")
        for key, ms in sorted(row["swap_cpu_ms_face"].items(), key=lambda kv: -kv[1]):
            share = 100 * row["swap_cpu_ms_frame"][key] / total
            print(f"    {key:36s} {ms:6.2f} {share:5.1f} %")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

r"""What a start pays for the streams' batched face network calls, with the engine cache filled:
loaded whole (:mod:`livecam.gpupipe.networks.precompiled`) or traced again through dynamo.

The calls are the ones :class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks` compiles for
many streams (``advanced.gpu.compile_dynamic_batches``: the full-range detector on two frames
of the stacked frames, the mesh on two regions; each compiled for any count from two up).
Each start is a fresh process. Four starts: the first fills the cache (compiles and saves),
the second opens them again (loaded whole where they were saved), the third and fourth after
each saved file is replaced by a ``.cannot`` note, the state a start finds when a call could
not be saved (traced again: the third compiles that path, whose graphs are not the saved
calls', the fourth takes its kernels from Inductor's cache). Prints a table and writes JSON.

Here (CPU, fp32; several minutes on 2 cores):
    python -m scripts.bench_network_start --device cpu --work-dir /tmp/bns \
        --json /tmp/bench_network_start.json
On the GPU machine (fp16), with a copy of mediapipe's ``modules`` (the ``.tflite`` files):
    LIVECAM_MEDIAPIPE_MODULES=... python3 -m scripts.bench_network_start --device cuda \
        --height 1080 --width 1920 --frames 64 --work-dir /tmp/bns --json $OUT/bns.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One start: open both networks and make their two-row calls; how each came and took."""
    import torch

    from livecam.engines import compile_progress
    from livecam.gpupipe.networks.calls import load_detectors, load_mesh, run_mesh

    heard: list[tuple[str, str, float]] = []

    class Heard:
        def started(self, part: str, inputs: tuple[object, ...]) -> None:
            pass

        def finished(self, part: str, inputs: tuple[object, ...], how: str,
                     took_s: float) -> None:
            heard.append((part, how, took_s))

    device = torch.device(args.device)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    cache = Path(args.work_dir) / "cache"
    frames = torch.zeros((args.frames, args.height, args.width, 3), dtype=torch.uint8,
                         device=device)
    index = torch.zeros((args.frames,), dtype=torch.long, device=device)
    index[:2] = torch.tensor([0, 1])
    side = min(args.height, args.width) / 2
    rows = torch.tensor([[args.width / 2, args.height / 2, side, 0.0, 0.0],
                         [args.width / 2, args.height / 2, side, 0.1, 1.0]], device=device)
    out_lm = torch.zeros((2, 468, 3), device=device)
    out_presence = torch.zeros((2,), device=device)
    t0 = time.perf_counter()
    with compile_progress.listening(Heard()), torch.inference_mode():
        (detector,) = load_detectors("full", models_dir=None, min_score=0.5, device=device,
                                     dtype=dtype, compile_dir=cache, dynamic_batches=True)
        mesh = load_mesh(models_dir=None, device=device, dtype=dtype, compile_dir=cache,
                         dynamic_batches=True)
        found = detector(frames, None, index[:2])  # a slice of the stack's index, as there
        run_mesh(mesh, frames, rows[:, 4].long(), rows, out_lm, out_presence)
        if device.type == "cuda":
            torch.cuda.synchronize()
    return {"total_s": time.perf_counter() - t0,
            "calls": [{"part": p, "how": h, "took_s": t} for p, h, t in heard],
            "scores_sum": float(found.scores.float().sum()),
            "landmarks_sum": float(out_lm.double().sum())}


def start(args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "scripts.bench_network_start", "--child",
               "--device", args.device, "--height", str(args.height), "--width",
               str(args.width), "--frames", str(args.frames), "--work-dir", str(args.work_dir)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"a start failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--height", type=int, default=96)
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--frames", type=int, default=4, help="the stacked frames' depth")
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    shutil.rmtree(args.work_dir, ignore_errors=True)
    saved_dir = args.work_dir / "cache" / "precompiled"
    runs = {"first start (fills the cache)": start(args)}
    notes = {p.name: p.read_text().strip() for p in saved_dir.glob("*.cannot")}
    runs["later start"] = start(args)
    for saved in saved_dir.glob("*.bin"):  # what a start finds where a call could not be saved
        saved.with_suffix(".cannot").write_text("RuntimeError: not saved (benchmark)\n")
        saved.unlink()
    # the first such start compiles that path anew (dynamo's graphs are not the saved
    # calls'); the next takes its kernels from Inductor's cache: the H200's starts
    runs["later start, not saved whole (1st)"] = start(args)
    runs["later start, not saved whole"] = start(args)
    print(f"{'start':38} {'part':16} {'how':9} {'s':>7}")
    for name, run in runs.items():
        for call in run["calls"]:
            print(f"{name:38} {call['part']:16} {call['how']:9} {call['took_s']:7.2f}")
    for name, note in notes.items():
        print(f"not saved whole after the first start: {name}: {note}")
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "height": args.height,
                                         "width": args.width, "frames": args.frames,
                                         "runs": runs, "cannot": notes}, indent=2))


if __name__ == "__main__":
    main()

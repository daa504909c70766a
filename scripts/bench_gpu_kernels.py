"""Where the GPU time of the small-kernel stages goes (companion of bench_gpu.py).

    python scripts/bench_gpu_kernels.py --photos DIR --models-dir DIR [--work-dir DIR]

For 1 and 16 faces at 1080p: the top CUDA kernels (total device ms per call) of the eager
face mesh, alignment and colour + paste-back under torch.profiler, and the generator's and face
mesh's graph time with ``torch.backends.cudnn.benchmark`` off and on. Prints tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_gpu_scenes import build_scene, find_faces, load_photos, tile_streams


def graph_ms(fn: Any, reps: int = 30) -> float:
    """Median ms of a CUDA-graph replay of ``fn``."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from livecam.analysis.gpu.models import load_blazeface
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.slots import Slot, SlotShape
    from livecam.testing.standins import build_inswapper
    from scripts.bench_gpu_measure import fill_for
    from scripts.bench_gpu_run import _modules

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, default=None)
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/lcw"))
    args = parser.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = args.work_dir / "inswapper_standin_full.onnx"
    if not onnx_path.exists():
        build_inswapper(onnx_path, size="full", batch="N")
    device = torch.device("cuda")
    engine = TorchEngine(onnx_path, device="cuda", precision="fp16", cuda_graphs=False)
    engine.open()
    ns = argparse.Namespace(models_dir=args.models_dir)
    mods = _modules(engine, device, "fp16", ns, 640)
    program = mods["program"]
    faces = find_faces(load_blazeface("full", models_dir=args.models_dir).to(device),
                       load_photos(args.photos), device)
    rng = np.random.default_rng(7)
    latents = rng.standard_normal((16, 512)).astype(np.float32)
    for n in (1, 16):
        scene = tile_streams(build_scene(faces, 1, 1080, 1920), n)
        slot = Slot.open(0, SlotShape(n, 1080, 1920, n), device)
        fill_for(scene, latents, {})(slot)
        program.roi_state = torch.zeros((n, 4), device=device)
        slot.upload()
        torch.cuda.synchronize()
        with torch.inference_mode():
            program.landmarks(slot, n)
            staged = program.prepare_swap(slot, n)
            pred = program.generate(staged).clone()
            program.finish(slot, staged, pred)
            torch.cuda.synchronize()
            parts = (("landmarks", lambda s=slot, k=n: program.landmarks(s, k)),
                     ("align_crop", lambda s=slot, k=n: program.prepare_swap(s, k)),
                     ("colour_paste", lambda s=slot, g=staged, p=pred: program.finish(s, g, p)))
            for part, fn in parts:
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        fn()
                    torch.cuda.synchronize()
                rows = [(e.key, e.device_time_total / 5 / 1e3, e.count // 5)
                        for e in prof.key_averages() if e.device_time_total > 0]
                rows.sort(key=lambda r: -r[1])
                total = sum(r[1] for r in rows)
                n_kernels = sum(r[2] for r in rows)
                print(f"\n## {n} faces, {part}: kernels {total:.3f} ms in ~{n_kernels} launches"
                      f" per call (graph {graph_ms(fn):.3f} ms)")
                for key, ms, count in rows[:8]:
                    print(f"  {ms:7.3f} ms x{count:3d}  {key[:100]}")
            for bench in (False, True):
                torch.backends.cudnn.benchmark = bench
                gen = graph_ms(lambda g=staged: program.generate(g))
                mesh = graph_ms(lambda s=slot, k=n: program.landmarks(s, k))
                print(f"{n} faces cudnn.benchmark={bench}: generator {gen:.3f} ms, "
                      f"mesh {mesh:.3f} ms")
            torch.backends.cudnn.benchmark = False
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

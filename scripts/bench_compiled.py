r"""Compiled generator vs the ONNX executor: cold start (build), warm start (load), ms per face.

It installs an inswapper-shaped stand-in the way users install models (a manifest accepting its
sha256), compiles it with the user's command (`livecam engines build inswapper_128`, timed:
the cold start), opens the engine a later `livecam run` opens, in a fresh process (timed: the
warm start), then times the generator engines `livecam run` builds for each
`advanced.engine.torch_mode` (the GPU pipeline's: fp16 + channels_last on CUDA, fp32 on a CPU) and
checks the compiled output against the executor and onnxruntime.

On the GPU machine (one call; ~2 min per batch size to compile with max-autotune, so the
default batches 1 and 16 take ~5-7 min):
    python3 -m scripts.bench_compiled --device cuda --work-dir /tmp/lcc \
        --json $OUT/bench_compiled.json
Here (CPU, small stand-in; a few minutes on 2 cores, timings drift +-40 % with load):
    python -m scripts.bench_compiled --device cpu --small --batches 2 \
        --json /tmp/bench_compiled.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODES = ("executor + CUDA graphs", "compiled", "compiled + CUDA graphs", "executor eager")


def install(work: Path, size: str) -> tuple[Path, Path]:
    """The stand-in generator and recognizer with manifests accepting them (models_dir,
    manifests_dir), installed once per work folder: the warm-start child finds the same
    models, so what the first process compiled is still theirs."""
    from tests.helpers.standins import install_standin_models

    root, marker = work / f"standins_{size}", work / f"standins_{size}" / "done"
    if not marker.exists():
        install_standin_models(root, size=size)
        marker.write_text("ok")
    return root / "models", root / "manifests"


def settings(args: argparse.Namespace, models: Path, manifests: Path) -> list[str]:
    batches = ",".join(str(b) for b in args.batch_list)
    return [f"advanced.models.dir={models}", f"advanced.models.manifests_dir={manifests}",
            f"advanced.engine.cache_dir={args.work_dir / 'cache'}", "engine.backend=torch",
            f"advanced.engine.device={args.device}",
            f"advanced.engine.compiled_batch_sizes=[{batches}]",
            f"advanced.engine.compile_max_autotune={'false' if args.no_autotune else 'true'}",
            "swap.mode=neural", "advanced.gpu.pipeline=always"]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def models_for(sets: list[str], torch_mode: str) -> Any:
    from livecam.config import load_config
    from livecam.swap.neural_models import NeuralModels

    mode = f"advanced.engine.torch_mode={torch_mode}"
    config = load_config(None, [*sets, mode])
    return NeuralModels.from_sections(config.models, config.engine, model=config.swap.model,
                                      max_faces=config.analysis.max_faces)


def open_only(sets: list[str]) -> int:
    """Child process: open the compiled generator as `livecam run` would; print timings."""
    t0 = time.perf_counter()
    import torch

    engine = models_for(sets, "compiled").gpu_generator(pipeline_graphs=True)
    t1 = time.perf_counter()
    engine.open()
    if engine.device.type == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"open_s": time.perf_counter() - t1, "import_s": t1 - t0,
                      "mode": engine.mode}))
    return 0


def engine_for(sets: list[str], mode: str) -> Any:
    torch_mode = {"executor + CUDA graphs": "cuda_graphs", "executor eager": "eager"}.get(
        mode, "compiled")
    return models_for(sets, torch_mode).gpu_generator(
        pipeline_graphs=mode in ("compiled", "executor eager"))


def time_engine(engine: Any, batch: int, warmup: int, iters: int) -> tuple[dict[str, Any],
                                                                            np.ndarray]:
    import torch

    gen = torch.Generator().manual_seed(batch)
    feeds = {"target": torch.rand((batch, 3, 128, 128), generator=gen).to(engine.device),
             "source": torch.nn.functional.normalize(torch.randn((batch, 512), generator=gen),
                                                     dim=1).to(engine.device)}
    cuda = engine.device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    engine.run_torch(feeds)  # the first call captures a CUDA graph where there is one
    sync()
    first_s = time.perf_counter() - t0
    for _ in range(warmup):
        engine.run_torch(feeds)
    sync()
    times_ms = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        engine.run_torch(feeds)
        sync()
        times_ms.append((time.perf_counter_ns() - t0) / 1e6)
    out = engine.run_torch(feeds)["output"].float().cpu().numpy()
    median = statistics.median(times_ms)
    return ({"batch": batch, "ms_per_call": median, "ms_per_face": median / batch,
             "min_ms": min(times_ms), "first_call_s": first_s}, out)


def parity(onnx_path: Path, outputs: dict[str, dict[int, np.ndarray]]) -> list[dict[str, Any]]:
    """Compiled vs the executor (same precision) and vs onnxruntime fp32 on the CPU."""
    import torch

    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine

    rows = []
    with OnnxRuntimeEngine(onnx_path, device="cpu") as ort:
        for batch, ours in outputs.get("compiled", {}).items():
            gen = torch.Generator().manual_seed(batch)
            feeds = {"target": torch.rand((batch, 3, 128, 128), generator=gen).numpy(),
                     "source": torch.nn.functional.normalize(
                         torch.randn((batch, 512), generator=gen), dim=1).numpy()}
            ref = ort.run(feeds)["output"]
            row: dict[str, Any] = {"batch": batch, "vs_onnxruntime": float(
                np.abs(ours - ref).max() / np.abs(ref).max())}
            executor = outputs.get("executor eager", {}).get(batch)
            if executor is not None:
                row["vs_executor"] = float(np.abs(ours - executor).max() / np.abs(executor).max())
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--small", action="store_true", help="small stand-in (CPU check)")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/livecam_bench_compiled"))
    parser.add_argument("--no-autotune", action="store_true", help="skip max-autotune (GPU)")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--json", help="write results here")
    parser.add_argument("--open-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.batch_list = [int(b) for b in args.batches.split(",")]
    size = "small" if args.small else "full"
    models_dir, manifests_dir = install(args.work_dir, size)
    sets = settings(args, models_dir, manifests_dir)
    if args.open_only:
        return open_only(sets)

    import torch

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("--device cuda but torch sees no CUDA GPU", file=sys.stderr)
        return 2
    warmup = args.warmup if args.warmup is not None else (10 if cuda else 1)
    iters = args.iters if args.iters is not None else (50 if cuda else 5)
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
        "stand_in": size, "batches": args.batch_list, "max_autotune": cuda and not
        args.no_autotune, "warmup": warmup, "iters": iters, "modes": {}}
    print(f"stand-in {size} on {results['device']}, torch {results['torch']}", flush=True)

    # cold start: the user's build command (what the work dir holds is rebuilt)
    from livecam.engines.engine_cache import EngineCache

    cache = EngineCache(args.work_dir / "cache")
    cache.clear("inswapper_128")
    build_args = [a for s in sets for a in ("--set", s)]
    t0 = time.perf_counter()
    built = subprocess.run([sys.executable, "-m", "livecam.cli", "engines", *build_args,
                            "build", "inswapper_128"], env=child_env(), capture_output=True,
                           text=True)
    results["build_s"] = time.perf_counter() - t0
    results["build_log"] = (built.stdout + built.stderr)[-4000:]
    print(f"livecam engines build: {results['build_s']:.1f} s (exit {built.returncode})",
          flush=True)
    if built.returncode != 0:
        print(built.stderr[-4000:], file=sys.stderr)
        return 1
    inductor = cache.root / "inductor"  # the compiled code of every batch
    results["inductor_cache_mib"] = sum(f.stat().st_size for f in inductor.rglob("*")
                                        if f.is_file()) / 2**20

    # warm start: a fresh process opens what `livecam run` opens
    t0 = time.perf_counter()
    warm = subprocess.run([sys.executable, "-m", "scripts.bench_compiled", "--open-only",
                           "--device", args.device, "--batches", args.batches, "--work-dir",
                           str(args.work_dir), *(["--small"] if args.small else []),
                           *(["--no-autotune"] if args.no_autotune else [])],
                          env=child_env(), capture_output=True, text=True, cwd=REPO)
    results["warm_process_s"] = time.perf_counter() - t0
    if warm.returncode != 0:
        print(warm.stderr[-4000:], file=sys.stderr)
        return 1
    results["warm"] = json.loads(warm.stdout.strip().splitlines()[-1])
    print(f"warm start: engine open {results['warm']['open_s']:.2f} s, process "
          f"{results['warm_process_s']:.1f} s ({results['warm']['mode']})", flush=True)

    outputs: dict[str, dict[int, np.ndarray]] = {}
    for mode in MODES:
        if "CUDA graphs" in mode and not cuda:
            results["modes"][mode] = {"skipped": "CUDA graphs need a CUDA device"}
            continue
        engine = engine_for(sets, mode)
        before = torch.cuda.memory_allocated() if cuda else 0
        t0 = time.perf_counter()
        engine.open()
        rows = [{"open_s": time.perf_counter() - t0, "engine_mode": engine.mode,
                 "device_mib": ((torch.cuda.memory_allocated() - before) / 2**20) if cuda
                 else None}]
        for batch in args.batch_list:
            row, out = time_engine(engine, batch, warmup, iters)
            rows.append(row)
            outputs.setdefault(mode, {})[batch] = out
        engine.close()
        results["modes"][mode] = rows
        print(f"  {mode}: " + ", ".join(f"b{r['batch']} {r['ms_per_face']:.3f} ms/face"
                                        for r in rows[1:]), flush=True)
    onnx_path = models_dir / "inswapper_128.onnx"
    results["parity"] = parity(onnx_path, outputs)

    lines = [f"Generator engines, {size} inswapper stand-in on {results['device']} "
             f"(torch {results['torch']}), ms per face (ms per call), median of {iters}:", "",
             "| batch | " + " | ".join(MODES) + " |", "|---|" + "---|" * len(MODES)]
    for i, batch in enumerate(args.batch_list):
        cells = []
        for mode in MODES:
            value = results["modes"][mode]
            cells.append("n/a" if not isinstance(value, list) else
                         f"{value[i + 1]['ms_per_face']:.3f} ({value[i + 1]['ms_per_call']:.3f})")
        lines.append(f"| {batch} | " + " | ".join(cells) + " |")
    lines += ["", f"cold start (`livecam engines build`, batches {args.batches}): "
              f"{results['build_s']:.1f} s; warm start (engine open in a new process): "
              f"{results['warm']['open_s']:.2f} s (process {results['warm_process_s']:.1f} s)",
              "engine open in this process: " + ", ".join(
                  f"{m} {v[0]['open_s']:.2f} s" for m, v in results["modes"].items()
                  if isinstance(v, list)),
              "parity (max |a-b| / max |b|): " + ", ".join(
                  f"b{p['batch']} vs onnxruntime {p['vs_onnxruntime']:.2e}"
                  + (f", vs executor {p['vs_executor']:.2e}" if "vs_executor" in p else "")
                  for p in results["parity"])]
    table = "\n".join(lines)
    print(table)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
    limit = 1e-2 if cuda else 1e-4
    return 0 if all(p["vs_onnxruntime"] <= limit for p in results["parity"]) else 1


if __name__ == "__main__":
    sys.exit(main())

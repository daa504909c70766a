"""Benchmark the torch engine on an inswapper-sized stand-in; check backend parity.

On the GPU machine, in one call:
    python -m scripts.bench_engines --device cuda --json $OUT/bench_engines.json \
        --markdown lab/perf-notes.md
Here (CPU, a few seconds, checks the script works):
    python -m scripts.bench_engines --device cpu --small --json /tmp/bench_engines.json

It builds the stand-in (random weights, inswapper_128's layout: 138 M parameters; ``--small``:
a few-MB model), runs the torch backend at each batch size in three modes -- eager fp32, fp16
(channels_last), fp16 + CUDA graphs (CUDA only) -- and reports ms per call and per face
(median of ``--iters`` timed calls after warm-up). A parity section compares the torch backend
on ``--device`` with onnxruntime on the CPU, on the small stand-ins (max relative error, defined
as max |torch - onnxruntime| / max |onnxruntime|; limits 1e-4 fp32, 1e-2 fp16).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MODES = (("eager fp32", "fp32", False), ("fp16", "fp16", False),
         ("fp16 + CUDA graphs", "fp16", True))


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench_mode(model: Path, device: str, precision: str, graphs: bool, batch: int,
               warmup: int, iters: int) -> dict[str, Any]:
    import torch

    from livecam.engines.torch_engine import TorchEngine

    engine = TorchEngine(model, device=device, precision=precision, cuda_graphs=graphs,
                         channels_last=precision == "fp16" and device.startswith("cuda"))
    engine.open()
    gen = torch.Generator().manual_seed(batch)
    feeds = {"target": torch.rand((batch, 3, 128, 128), generator=gen).to(device),
             "source": torch.nn.functional.normalize(
                 torch.randn((batch, 512), generator=gen), dim=1).to(device)}
    for _ in range(warmup):
        engine.run_torch(feeds)
    _sync(torch, device)
    times_ms = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        engine.run_torch(feeds)
        _sync(torch, device)
        times_ms.append((time.perf_counter_ns() - t0) / 1e6)
    out = engine.run_torch(feeds)["output"].float().cpu().numpy()
    engine.close()
    median = statistics.median(times_ms)
    return {"batch": batch, "ms_per_call": median, "ms_per_face": median / batch,
            "min_ms": min(times_ms), "output": out}


def parity(device: str, workdir: Path) -> list[dict[str, Any]]:
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.engines.torch_engine import TorchEngine
    from tests.helpers.standins import build_arcface, build_inswapper

    rng = np.random.default_rng(0)
    source = rng.standard_normal((4, 512)).astype(np.float32)
    cases = [
        ("inswapper stand-in", build_inswapper(workdir / "sw_small.onnx", batch="N"), "output",
         {"target": rng.random((4, 3, 128, 128), dtype=np.float32),
          "source": source / np.linalg.norm(source, axis=1, keepdims=True)}),
        ("arcface stand-in", build_arcface(workdir / "af_small.onnx"), "683",
         {"input.1": rng.uniform(-1, 1, (4, 3, 112, 112)).astype(np.float32)}),
    ]
    rows = []
    for label, path, out_name, feeds in cases:
        with OnnxRuntimeEngine(path, device="cpu") as ref_engine:
            ref = ref_engine.run(feeds)[out_name]
        for precision, limit in (("fp32", 1e-4), ("fp16", 1e-2)):
            with TorchEngine(path, device=device, precision=precision,
                             cuda_graphs=False) as engine:
                ours = engine.run(feeds)[out_name]
            err = float(np.abs(ours - ref).max() / np.abs(ref).max())
            rows.append({"model": label, "precision": precision, "rel_error": err,
                         "limit": limit, "ok": err <= limit})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--small", action="store_true", help="small stand-in (CPU check)")
    parser.add_argument("--batches", default="1,4,16")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--json", required=True, help="write results here")
    parser.add_argument("--markdown", help="append a results table to this file")
    args = parser.parse_args(argv)

    import torch

    from tests.helpers.standins import build_inswapper, count_parameters

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("--device cuda but torch sees no CUDA GPU", file=sys.stderr)
        return 2
    warmup = args.warmup if args.warmup is not None else (10 if cuda else 1)
    iters = args.iters if args.iters is not None else (50 if cuda else 3)
    batches = [int(b) for b in args.batches.split(",")]
    size = "small" if args.small else "full"
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "torch": torch.__version__, "stand_in": size, "warmup": warmup, "iters": iters,
        "modes": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        t0 = time.perf_counter()
        model = build_inswapper(workdir / f"inswapper_{size}.onnx", size=size, batch="N")
        results["parameters"] = count_parameters(model)
        results["build_s"] = time.perf_counter() - t0
        print(f"stand-in: {results['parameters'] / 1e6:.1f} M parameters "
              f"(built in {results['build_s']:.1f} s) on {results['device']}")
        for label, precision, graphs in MODES:
            if graphs and not cuda:
                results["modes"][label] = {"skipped": "CUDA graphs need a CUDA device"}
                continue
            rows = []
            for batch in batches:
                row = bench_mode(model, args.device, precision, graphs, batch, warmup, iters)
                rows.append(row)
            results["modes"][label] = rows
        # fp16 modes against eager fp32 on the same inputs (sanity of the fast paths)
        ref_rows = {r["batch"]: r["output"] for r in results["modes"]["eager fp32"]}
        for value in results["modes"].values():
            if isinstance(value, list):
                for r in value:
                    ref = ref_rows[r["batch"]]
                    r["rel_error_vs_fp32"] = float(np.abs(r.pop("output") - ref).max()
                                                   / np.abs(ref).max())
        results["parity"] = parity(args.device, workdir)

    lines = [f"torch backend, {results['parameters'] / 1e6:.1f} M-parameter inswapper stand-in "
             f"on {results['device']} (torch {results['torch']}), ms per face "
             f"(ms per call), median of {iters}:", "",
             "| batch | " + " | ".join(label for label, _, _ in MODES) + " |",
             "|---|" + "---|" * len(MODES)]
    for i, batch in enumerate(batches):
        cells = []
        for label, _, _ in MODES:
            value = results["modes"][label]
            cells.append("n/a" if not isinstance(value, list) else
                         f"{value[i]['ms_per_face']:.2f} ({value[i]['ms_per_call']:.2f})")
        lines.append(f"| {batch} | " + " | ".join(cells) + " |")
    lines += ["", "Backend parity, torch on " + args.device + " vs onnxruntime CPU "
              "(max |a-b| / max |b|):", "", "| model | precision | rel. error | limit |",
              "|---|---|---|---|"]
    for p in results["parity"]:
        lines.append(f"| {p['model']} | {p['precision']} | {p['rel_error']:.2e} | "
                     f"{p['limit']:.0e} |")
    table = "\n".join(lines)
    print(table)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2))
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as f:
            f.write(f"\n## Engines: torch backend ({time.strftime('%Y-%m-%d')})\n\n"
                    f"Command: `python -m scripts.bench_engines --device {args.device}"
                    f"{' --small' if args.small else ''}`\n\n{table}\n")
    return 0 if all(p["ok"] for p in results["parity"]) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Does this machine's torch open *any* AOTInductor artefact, and through which loader?
(issue 12, the compiled generator)

On the H200 (torch 2.11.0+cu130) every ``aoti_load_package`` of livecam's compiled generator
crashed with SIGSEGV (perf-notes runs 13-18), also for a two-layer conv net. This script
separates the loaders: a two-layer conv net is compiled as ``livecam engines build`` compiles
(AOTInductor package) and opened in a child process by each route, so a crash is a result,
not the end of the script:

- ``package``: ``torch._inductor.aoti_load_package`` (the package loader, C++ unzip + dlopen);
- ``metadata``: only the package loader's metadata read (where in the loader it crashes);
- ``runner`` (and ``runner_after_cuda_init``): the package unzipped in Python, its shared
  library opened by the container runner (``AOTIModelContainerRunnerCuda``/``Cpu``)
  directly, without the package loader;
- ``dlopen``: only ``ctypes.CDLL`` of that library;
- ``megacache``: not AOTInductor: ``torch.compile`` of the same net, its caches saved with
  ``save_cache_artifacts`` and loaded by a fresh process (what a warm start costs).

Prints a table and writes JSON.

    python -m scripts.probe_aoti --device cuda --out aoti.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

_RUN = """
x = torch.randn(1, 3, 64, 64, device=sys.argv[2], dtype=getattr(torch, sys.argv[3]))
y = run(x)
y = y[0] if isinstance(y, (list, tuple)) else y
print("ok", tuple(y.shape), float(y.float().abs().mean()))
"""

# the package unzipped beside it (main does that), its library opened by the container runner
_RUNNER = """
import sys, glob, torch
so = glob.glob(sys.argv[1] + ".unpacked/*/data/aotinductor/*/*.so")[0]
dev = torch.device(sys.argv[2])
if dev.type == "cuda":
    runner = torch._C._aoti.AOTIModelContainerRunnerCuda(so, 1, str(dev), so.rsplit("/", 1)[0])
else:
    runner = torch._C._aoti.AOTIModelContainerRunnerCpu(so, 1)
run = lambda *xs: runner.run(list(xs))
"""

_OPEN = {
    "package": """
import sys, torch
run = torch._inductor.aoti_load_package(sys.argv[1])
""" + _RUN,
    "metadata": """
import sys, torch
meta = torch._C._aoti.AOTIModelPackageLoader.load_metadata_from_package(sys.argv[1], "model")
print("ok", sorted(meta)[:6])
""",
    "runner": _RUNNER + _RUN,
    "runner_after_cuda_init": """
import sys, torch
torch.zeros(1, device=sys.argv[2]).sum().item()
""" + _RUNNER + _RUN,
    "dlopen": """
import ctypes, sys, glob, torch
so = glob.glob(sys.argv[1] + ".unpacked/*/data/aotinductor/*/*.so")[0]
ctypes.CDLL(so)
print("ok dlopen", so.rsplit("/", 1)[-1][:12])
""",
}


def build(device: str, dtype_name: str, folder: Path) -> tuple[Path, float]:
    import torch

    dtype = getattr(torch, dtype_name)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 3, 3, padding=1)).to(device, dtype).eval()
    x = torch.randn(1, 3, 64, 64, device=device, dtype=dtype)
    t0 = time.perf_counter()
    with torch.inference_mode():
        program = torch.export.export(net, (x,))
    path = torch._inductor.aoti_compile_and_package(
        program, package_path=str(folder / f"tiny-{dtype_name}.pt2"))
    return Path(path), time.perf_counter() - t0


def open_in_child(route: str, path: Path, device: str, dtype_name: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _OPEN[route], str(path),
                           device, dtype_name], capture_output=True, text=True, timeout=300)
    said = done.stdout.strip() or done.stderr.strip().splitlines()[-1:] or ["(no output)"]
    row: dict[str, object] = {"route": route, "exit": done.returncode, "result": said}
    if done.returncode != 0:
        row["stderr_tail"] = done.stderr[-1500:]
    return row


_MEGA_CHILD = """
import sys, time, torch
from torch._dynamo.utils import counters
t0 = time.perf_counter()
torch.compiler.load_cache_artifacts(open(sys.argv[1], "rb").read())
net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                          torch.nn.Conv2d(16, 3, 3, padding=1))
net = net.to(sys.argv[2], torch.float16).eval()
torch.manual_seed(0)
run = torch.compile(net)
with torch.no_grad():
    run(torch.randn(1, 3, 64, 64, device=sys.argv[2], dtype=torch.float16))
hits = counters["inductor"]
print("ok warm start", round(time.perf_counter() - t0, 1), "s, fx cache hits",
      hits["fxgraph_cache_hit"], "misses", hits["fxgraph_cache_miss"])
"""


def megacache(device: str) -> list[dict[str, object]]:
    """torch.compile of the same net, its caches saved with save_cache_artifacts and loaded
    by a fresh process (another cache directory): how long does that warm start take?"""
    import os

    import torch

    row: dict[str, object] = {"torch": torch.__version__, "device": device, "dtype": "float16",
                              "route": "megacache"}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "cold")
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                  torch.nn.Conv2d(16, 3, 3, padding=1)).to(device,
                                                                           torch.float16).eval()
        t0 = time.perf_counter()
        with torch.no_grad():
            torch.compile(net)(torch.randn(1, 3, 64, 64, device=device, dtype=torch.float16))
        row["build_s"] = round(time.perf_counter() - t0, 1)
        saved = torch.compiler.save_cache_artifacts()
        if saved is None:
            return [{**row, "result": "save_cache_artifacts returned nothing"}]
        blob = Path(tmp) / "artifacts.bin"
        blob.write_bytes(saved[0])
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "warm")}
        done = subprocess.run([sys.executable, "-c", _MEGA_CHILD, str(blob), device],
                              capture_output=True, text=True, timeout=300, env=env)
        said = done.stdout.strip() or done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return [{**row, "exit": done.returncode, "result": said}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="float16,float32")
    parser.add_argument("--out", type=Path, default=Path("aoti.json"))
    args = parser.parse_args(argv)
    import torch

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype_name in args.dtypes.split(","):
            base: dict[str, object] = {"torch": torch.__version__, "device": args.device,
                                       "dtype": dtype_name}
            try:
                path, build_s = build(args.device, dtype_name, Path(tmp))
            except Exception as exc:  # the build itself failing is a result too
                rows.append({**base, "route": "build",
                             "result": f"build failed: {str(exc).splitlines()[0][:200]}"})
                continue
            with zipfile.ZipFile(path) as archive:  # for the runner and dlopen routes
                archive.extractall(f"{path}.unpacked")
            for route in _OPEN:
                rows.append({**base, "build_s": round(build_s, 1),
                             **open_in_child(route, path, args.device, dtype_name)})
    rows.extend(megacache(args.device))
    print("| torch | dtype | route | build s | exit | result |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['torch']} | {r['dtype']} | {r['route']} | {r.get('build_s', '-')} "
              f"| {r.get('exit', '-')} | {r['result']} |")
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

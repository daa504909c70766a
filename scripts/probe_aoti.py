"""Does this machine's torch open *any* AOTInductor artefact, and through which loader?
(issue 12, the compiled generator)

On the H200 (torch 2.11.0+cu130) every ``aoti_load_package`` of livecam's compiled generator
crashed with SIGSEGV (perf-notes runs 13-18), also for a two-layer conv net. This script
separates the loaders: a two-layer conv net is compiled as ``livecam engines build`` compiles
(AOTInductor package) and opened in a child process by each route, so a crash is a result,
not the end of the script:

- ``package``: ``torch._inductor.aoti_load_package`` (the package loader, C++ unzip + dlopen);
- ``metadata``: only the package loader's metadata read (where in the loader it crashes);
- ``runner``: the package unzipped in Python, its shared library opened by the container
  runner (``AOTIModelContainerRunnerCuda``/``Cpu``) directly, without the package loader.

Prints a table and writes JSON.

    python scripts/probe_aoti.py --device cuda --out aoti.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_RUN = """
x = torch.randn(1, 3, 64, 64, device=sys.argv[2], dtype=getattr(torch, sys.argv[3]))
y = run(x)
y = y[0] if isinstance(y, (list, tuple)) else y
print("ok", tuple(y.shape), float(y.float().abs().mean()))
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
    "runner": """
import sys, torch
from livecam.engines.torch_compiled import open_runner
run = open_runner(sys.argv[1], torch.device(sys.argv[2]))
""" + _RUN,
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
            for route in _OPEN:
                rows.append({**base, "build_s": round(build_s, 1),
                             **open_in_child(route, path, args.device, dtype_name)})
    print("| torch | dtype | route | build s | exit | result |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['torch']} | {r['dtype']} | {r['route']} | {r.get('build_s', '-')} "
              f"| {r.get('exit', '-')} | {r['result']} |")
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does this machine's torch open *any* AOTInductor package? (issue 12, the compiled generator)

On the H200 (torch 2.11.0+cu130) every open of livecam's compiled generator crashed with
SIGSEGV in ``aoti_load_package`` (perf-notes runs 13-17). This separates the machine from
livecam's graph: a two-layer conv net is compiled the way ``livecam engines build`` compiles
(AOTInductor package, fp32 and fp16) and each package is opened and run in a child process, so
a crash is a result, not the end of the script. Prints a table and writes JSON.

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

_OPEN = """
import sys, torch
pkg = torch._inductor.aoti_load_package(sys.argv[1])
x = torch.randn(1, 3, 64, 64, device=sys.argv[2], dtype=getattr(torch, sys.argv[3]))
y = pkg(x)
y = y[0] if isinstance(y, (list, tuple)) else y
print("ok", tuple(y.shape), float(y.float().abs().mean()))
"""


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=Path("aoti.json"))
    args = parser.parse_args(argv)
    import torch

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype_name in ("float32", "float16"):
            row: dict[str, object] = {"torch": torch.__version__, "device": args.device,
                                      "dtype": dtype_name}
            try:
                path, build_s = build(args.device, dtype_name, Path(tmp))
                row["build_s"] = round(build_s, 1)
            except Exception as exc:  # the build itself failing is a result too
                row["result"] = f"build failed: {str(exc).splitlines()[0][:200]}"
                rows.append(row)
                continue
            done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _OPEN, str(path),
                                   args.device, dtype_name], capture_output=True, text=True,
                                  timeout=300)
            row["exit"] = done.returncode
            row["result"] = (done.stdout.strip() or done.stderr.strip().splitlines()[-1:]
                             or ["(no output)"])
            if done.returncode != 0:
                row["stderr_tail"] = done.stderr[-1500:]
            rows.append(row)
    print("| torch | dtype | build s | exit | result |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['torch']} | {r['dtype']} | {r.get('build_s', '-')} | {r.get('exit', '-')} "
              f"| {r['result']} |")
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast and in how little memory a YAML alias bomb is refused (issue 11 goal: < 1 s, < 50 MB).

Runs ``livecam run --config BOMB`` as a user runs it (a subprocess; its own peak RSS comes from
``wait4``), beside the same command with a config error that needs no YAML work (the cost of
starting Python and livecam), and ``load_config(BOMB)`` in this process under tracemalloc (the
memory the loader itself allocates). Prints a table, writes JSON.

    python -m scripts.bench_config_bomb [--repeat 5] [--json out/bench_config_bomb.json]

Each subprocess is capped at 2 GiB of address space, so a loader that expands the bomb fails
(MemoryError) instead of taking the machine's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = [f"x0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "capture:\n  fourcc:\n" + "".join(f"    {line}\n" for line in lines)


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_cli(args: list[str], timeout_s: float) -> dict[str, object]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "livecam.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_cap)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    # communicate() reaped the child; its rusage is in RUSAGE_CHILDREN only as a running max,
    # so each measurement runs in a fresh helper process (see main)
    return {"seconds": time.perf_counter() - t0, "exit": proc.returncode,
            "stderr_last_line": err.decode(errors="replace").strip().splitlines()[-1:]}


def child_measure(args: list[str], timeout_s: float) -> dict[str, object]:
    result = run_cli(args, timeout_s)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    parser.add_argument("--json", default="out/bench_config_bomb.json")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child is not None:  # one measurement in a fresh process: RUSAGE_CHILDREN is its own
        print(json.dumps(child_measure(ns.child, ns.timeout_s)))
        return

    tmp = Path(tempfile.mkdtemp())
    bomb = tmp / "bomb.yaml"
    bomb.write_text(alias_bomb())
    cases = {
        "alias bomb (490 B)": ["run", "--config", str(bomb), "--input", "synthetic", "--output",
                               "null", "--frames", "1"],
        "baseline: --set error": ["run", "--set", "capture.fps=abc", "--input", "synthetic",
                                  "--output", "null", "--frames", "1"],
    }
    rows = {}
    for label, args in cases.items():
        runs = []
        for _ in range(ns.repeat):
            out = subprocess.run([sys.executable, __file__, "--timeout-s", str(ns.timeout_s),
                                  "--child", *args], capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
            runs.append(json.loads(out.stdout))
        rows[label] = {
            "exit": sorted({r["exit"] for r in runs}),
            "seconds_median": statistics.median(r["seconds"] for r in runs),
            "seconds_max": max(r["seconds"] for r in runs),
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in runs),
            "message": runs[-1]["stderr_last_line"],
        }

    from livecam.config import load_config
    from livecam.core.errors import ConfigError

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        load_config(bomb)
        refused = False
    except ConfigError:
        refused = True
    loader_s = time.perf_counter() - t0
    loader_peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()

    print(f"{'case':26s} {'exit':>6s} {'median s':>9s} {'max s':>7s} {'peak RSS MB':>12s}")
    for label, row in rows.items():
        print(f"{label:26s} {row['exit']!s:>6s} {row['seconds_median']:9.2f} "
              f"{row['seconds_max']:7.2f} {row['peak_rss_mb_max']:12.1f}")
    print(f"load_config(bomb) in process: refused={refused}, {loader_s * 1000:.1f} ms, "
          f"{loader_peak_mb:.2f} MB allocated at peak (tracemalloc)")
    print(f"message: {rows['alias bomb (490 B)']['message']}")
    Path(ns.json).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.json).write_text(json.dumps({"cases": rows, "loader": {
        "refused": refused, "seconds": loader_s, "peak_mb": loader_peak_mb},
        "bomb_bytes": len(bomb.read_bytes()), "repeat": ns.repeat}, indent=2))
    print(f"wrote {ns.json}")


if __name__ == "__main__":
    main()

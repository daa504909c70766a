"""The host side of the many-streams GPU pipeline, without GPU compute (issue 41 item 4).

    python -m scripts.bench_host --streams 1,4,8,16 --out /tmp/host.json
    python -m scripts.bench_host --streams 16 --profile /tmp/prof   # per-thread cProfile

The GPU pipeline (``advanced.gpu.pipeline=always``, compiling off) runs on torch's CPU device with
tiny frames (160x96 by default: the small scene of ``scripts/bench_gpu.py`` scaled down) and
the small stand-in networks, so what each frame costs is mostly the host's work around the
networks: what grows with the number of streams shows here as CPU ms per frame that grows
with N. Each run is built as ``livecam run`` builds N ``--input``/``--output`` pairs
(``measure_run``: live at 30 fps, one face per stream, null output). Per N: fps per stream
(min-max), the streams' own threads' CPU ms per frame (``Metrics.cpu_ns``), the whole
process's CPU ms per frame (all threads, divided by every stream's new frames), frames per
swap tick and the swap's submit->done ms (``swap.host`` where the stages report it).
``--profile DIR`` profiles every thread with cProfile (``threading.setprofile``) and writes
one pstats file per thread-name group plus the top functions by own time: the profiler
slows Python code several times, so compare profiles with profiles, figures with figures.
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import os
import pstats
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from scripts.bench_gpu_product import measure_run
from scripts.bench_gpu_scenes import write_clip
from scripts.gpu_harness import prepare
from scripts.thread_ops import ThreadOps

log = logging.getLogger("bench_host")


class ThreadProfiles:
    """A cProfile per thread started while installed (``threading.setprofile``)."""

    def __init__(self) -> None:
        self.profiles: list[tuple[str, cProfile.Profile]] = []
        self._lock = threading.Lock()

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append((threading.current_thread().name, profile))
        profile.enable()  # replaces this hook for the thread

    def install(self) -> None:
        threading.setprofile(self._hook)

    def uninstall(self) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]

    def write(self, folder: Path, top: int = 25) -> dict[str, str]:
        """One pstats file per thread group (the name without its numbers), and the top
        ``top`` functions by own time of each group as text."""
        folder.mkdir(parents=True, exist_ok=True)
        groups: dict[str, list[cProfile.Profile]] = {}
        for name, profile in self.profiles:
            profile.disable()
            groups.setdefault(re.sub(r"[-_ ]?\d+", "", name) or "thread", []).append(profile)
        texts = {}
        for group, profiles in groups.items():
            stats = pstats.Stats(profiles[0])
            for profile in profiles[1:]:
                stats.add(profile)
            stats.dump_stats(str(folder / f"{group}.pstats"))
            out = io.StringIO()
            pstats.Stats(str(folder / f"{group}.pstats"), stream=out).sort_stats(
                "tottime").print_stats(top)
            texts[group] = out.getvalue()
            (folder / f"{group}.txt").write_text(texts[group])
        return texts


def main(argv: list[str] | None = None) -> int:
    import cv2

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="1,4,8,16", help="stream counts, comma-separated")
    parser.add_argument("--size", default="160x96", help="frame size WxH")
    parser.add_argument("--window-s", type=float, default=6.0)
    parser.add_argument("--warm-s", type=float, default=3.0)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write per-thread cProfile stats here (one N at a time)")
    parser.add_argument("--torch-networks", action="store_true",
                        help="the follower's networks as the GPU path runs them (the torch "
                        "ports shared by the streams, the edge strips built from the uploaded "
                        "frame: livecam.gpupipe.factory.torch_follower_networks) on torch's "
                        "CPU device, instead of MediaPipe's CPU networks, which a CPU start "
                        "takes")
    parser.add_argument("--ops", type=float, default=0.0, metavar="SECONDS",
                        help="after each window, count the torch ops a frame (about a kernel "
                        "launch each on a GPU) by the livecam function calling them, this "
                        "long (ThreadOps)")
    parser.add_argument("--label", default="", help="a name for this code (before/after)")
    parser.add_argument("--out", type=Path, default=Path("bench_host.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    width, height = (int(v) for v in args.size.split("x"))
    work = (args.work_dir or Path(tempfile.mkdtemp(prefix="livecam_host_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"label": args.label, "size": args.size, "cores": os.cpu_count(),
                              "runs": {}, "errors": {}}
    setup_args = argparse.Namespace(small=True, photos=None, models_dir=None, input="clip",
                                    sets=["advanced.engine.device=cpu",
                                          "advanced.gpu.compile_paste=false",
                                          "advanced.gpu.compile_networks=false", *args.sets])
    setup = prepare(setup_args, work, report)
    if args.torch_networks:
        _torch_networks_on_cpu()
    frame = cv2.resize(setup["frames"][1], (width, height), interpolation=cv2.INTER_AREA)
    clip = f"file:{write_clip(frame, work / f'scene_{width}x{height}.nut')}"
    config = setup["config"]("analysis.max_faces=1")
    for n in [int(x) for x in args.streams.split(",") if x]:
        profiles = ThreadProfiles() if args.profile else None
        if profiles is not None:
            profiles.install()
        ops = ThreadOps() if args.ops > 0 else None
        if ops is not None:
            ops.install()
        try:
            got = measure_run(config, [(clip, "null")] * n, setup["identities"],
                              warm_s=args.warm_s, window_s=args.window_s,
                              then=(lambda streams, o=ops: o.window(streams, args.ops))
                              if ops is not None else None)
        except Exception as exc:  # say it and go on with the next N
            log.exception("%d streams failed", n)
            report["errors"][str(n)] = f"{type(exc).__name__}: {exc}"[:600]
            continue
        finally:
            if profiles is not None:
                profiles.uninstall()
            if ops is not None:
                ops.uninstall()
        st = got["streams"]
        new = sum(s["new"] for s in st)
        process_cpu_ms = got["host_cpu_percent"] / 100 * (os.cpu_count() or 1) \
            * got["window_s"] * 1000
        cpu = [s["host_cpu_ms_per_frame"] for s in st if s["host_cpu_ms_per_frame"]]
        swap = [s["stages_ms"].get("swap", {}).get("p50") for s in st]
        report["runs"][str(n)] = {
            "fps_min": min(s["fps"] for s in st), "fps_max": max(s["fps"] for s in st),
            "fps_total": new / got["window_s"],
            "stream_cpu_ms_per_frame": sum(cpu) / len(cpu) if cpu else None,
            "process_cpu_ms_per_frame": process_cpu_ms / new if new else None,
            "process_cpu_percent": got["host_cpu_percent"],
            "frames_per_tick": got["frames_per_tick"],
            "swap_stage_ms": (sum(x for x in swap if x) / len([x for x in swap if x])
                              if any(swap) else None),
            "stages_ms": {k: v.get("p50") for k, v in st[0]["stages_ms"].items()},
            "stage_errors": sum(s["stage_errors"] for s in st), "ops": got["profile"]}
        if profiles is not None:
            profiles.write(args.profile / f"n{n}")
        args.out.write_text(json.dumps(report, indent=2, default=float))
    print_table(report)
    args.out.write_text(json.dumps(report, indent=2, default=float))
    print(f"\nwrote {args.out}")
    return 0


def _torch_networks_on_cpu() -> None:
    """``build_gpu_stages`` takes the follower's torch networks on the CPU (their seam; a
    CPU start takes MediaPipe's networks)."""
    from livecam.gpupipe import factory

    def torch_networks(config: Any, device: str, *, shared: Any = None,
                       stream: int = 0) -> tuple[Any, Any]:
        return factory.torch_follower_networks(config, device, shared=shared, stream=stream)

    factory.follower_networks = torch_networks  # type: ignore[assignment]


def _f(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def print_table(report: dict[str, Any]) -> None:
    print(f"\n# host side per frame, CPU harness {report['size']} ({report['label']}, "
          f"{report['cores']} cores)")
    for n, error in report["errors"].items():
        print(f"ERROR with {n} streams: {error}")
    print("| streams | fps/stream min-max | stream threads CPU ms/frame | process CPU ms/frame "
          "| process CPU % | frames/tick | swap stage p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for n, r in report["runs"].items():
        print(f"| {n} | {r['fps_min']:.1f}-{r['fps_max']:.1f} | "
              f"{_f(r['stream_cpu_ms_per_frame'])} | {_f(r['process_cpu_ms_per_frame'])} | "
              f"{r['process_cpu_percent']:.0f} | {_f(r['frames_per_tick'], '.1f')} | "
              f"{_f(r['swap_stage_ms'])} |")
    for n, r in report["runs"].items():
        ops = r.get("ops")
        if not ops:
            continue
        print(f"\n{n} streams: {ops['ops_per_frame']:.0f} torch ops a frame "
              f"({ops['frames']} frames), by the livecam code calling them:")
        print("| caller | ops a frame |\n|---|---|")
        for caller, count in ops["by_caller"].items():
            print(f"| {caller} | {count:.1f} |")


if __name__ == "__main__":
    raise SystemExit(main())

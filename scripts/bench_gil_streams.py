"""How the face follower's Python scales with streams sharing one process (the GIL), on a CPU.

    python -m scripts.bench_gil_streams [--threads 1,4,8,16] [--torch-calls 0,20]
                                        [--seconds 4] [--switch-interval-ms 0.25]
                                        [--json bench_gil_streams.json]

Each thread stands for one stream's pipeline thread: its own ``FaceFollower`` (livecam's, with
the fake networks of ``bench_follower_python.py``, one face on a 1080p frame) follows frames
as fast as it can for ``--seconds``. Python's GIL lets one thread run Python at a time, so the
ideal is the same frames/s in all whatever the thread count; what is lost to the hand-overs of
the GIL among the threads shows as fewer. ``--torch-calls K`` makes every fake network call
also run K tiny torch operations: torch's Python bindings let go of the GIL around each one, as
the GPU networks' copies, event records and graph replays do on CUDA (H200 run 50: with 16
streams a frame's Python took about 2.8 ms against 1.5 with one stream). A second table probes
the same for a pure Python loop and for one numpy operation on arrays of 400 and of 936
elements. Prints the tables and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from scripts.bench_follower_python import (
    FRAME_WH,
    FakeEdgeSearch,
    FakeNetworks,
    FakeScene,
    FakeSearch,
)


class _TorchCalls:
    """``calls`` tiny torch operations (each lets go of the GIL in torch's bindings)."""

    def __init__(self, calls: int) -> None:
        import torch

        self.calls = calls
        self._x = torch.zeros(1)

    def __call__(self) -> None:
        for _ in range(self.calls):
            self._x.add_(1.0)


class _SceneView:
    """One stream's view of a shared :class:`FakeScene`: the same frames, its own position."""

    def __init__(self, scene: FakeScene) -> None:
        self.marks, self.faces, self.frame = scene.marks, scene.faces, 0


class _StreamNetworks(FakeNetworks):
    """One stream's fake networks, with ``torch_calls`` run in each network call."""

    def __init__(self, scene: _SceneView, torch_calls: _TorchCalls) -> None:
        super().__init__(scene)  # type: ignore[arg-type]
        self._torch = torch_calls

    def detect(self, image_bgr: Any) -> Any:
        self._torch()
        return super().detect(image_bgr)

    def landmarks(self, image_bgr: Any, rois: Any) -> Any:
        self._torch()
        return super().landmarks(image_bgr, rois)


def measure(threads: int, torch_calls: int, seconds: float, scene: FakeScene
            ) -> dict[str, float]:
    """Frames followed per second in all, with ``threads`` followers running at once."""
    from livecam.analysis.follower import FaceFollower
    from livecam.config.analysis import AnalysisConfig

    image = np.zeros((FRAME_WH[1], FRAME_WH[0], 3), np.uint8)
    start = threading.Barrier(threads + 1)
    stop = threading.Event()
    counts = [0] * threads
    cpu_s = [0.0] * threads

    def run(k: int) -> None:
        view = _SceneView(scene)
        nets = _StreamNetworks(view, _TorchCalls(torch_calls))
        follower = FaceFollower(AnalysisConfig(max_faces=6), nets, FakeSearch(), fps=30.0,
                                edge_search=FakeEdgeSearch())
        follower.open()
        for i in range(30):  # warm: the face is followed
            view.frame = i % len(scene.faces)
            follower.follow(image, i)
        start.wait()
        c0, i = time.thread_time(), 30
        while not stop.is_set():
            view.frame = i % len(scene.faces)
            follower.follow(image, i)
            i += 1
        counts[k] = i - 30
        cpu_s[k] = time.thread_time() - c0

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    stop.wait(seconds)
    stop.set()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    frames = sum(counts)
    return {"threads": threads, "torch_calls": torch_calls, "frames_per_s": frames / wall,
            "cpu_us_per_frame": 1e6 * sum(cpu_s) / max(1, frames),
            "min_thread_fps": min(counts) / wall}


def _python_work() -> int:
    total = 0
    for i in range(200):
        total += i * i
    return total


def _numpy_work(elements: int) -> Any:
    """``(a + b).sum()`` on float32 arrays of ``elements``: numpy lets go of the GIL inside a
    ufunc on more than 500 elements (a face's 468 x 2 landmarks are 936), not on fewer."""
    a = np.ones(elements, np.float32)
    b = np.ones(elements, np.float32)
    return lambda: (a + b).sum()


def probe(work: Any, threads: int, seconds: float) -> float:
    """``work()`` as fast as ``threads`` threads can: calls a second in all."""
    stop = threading.Event()
    counts = [0] * threads

    def run(k: int) -> None:
        n = 0
        while not stop.is_set():
            for _ in range(100):
                work()
            n += 100
        counts[k] = n

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    stop.wait(seconds)
    stop.set()
    for w in workers:
        w.join()
    return sum(counts) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,4,8,16")
    parser.add_argument("--torch-calls", default="0,20")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--json", type=Path, default=Path("bench_gil_streams.json"))
    parser.add_argument("--switch-interval-ms", type=float, default=0.25,
                        help="sys.setswitchinterval, as livecam run sets it "
                             "(advanced.pipeline.gil_switch_interval_ms)")
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval_ms / 1e3)
    scene = FakeScene(1, 200)
    rows = [measure(t, k, args.seconds, scene)
            for k in (int(x) for x in args.torch_calls.split(","))
            for t in (int(x) for x in args.threads.split(","))]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, switch interval "
          f"{sys.getswitchinterval() * 1e3:.2f} ms, load {os.getloadavg()[0]:.1f}")
    print("| threads | torch calls a network call | frames/s in all | vs 1 thread | "
          "CPU µs a frame | slowest thread fps |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        one = next(x for x in rows if x["torch_calls"] == r["torch_calls"])
        print(f"| {r['threads']} | {r['torch_calls']} | {r['frames_per_s']:.0f} | "
              f"{r['frames_per_s'] / one['frames_per_s']:.2f} | {r['cpu_us_per_frame']:.0f} | "
              f"{r['min_thread_fps']:.0f} |")
    works = {"pure Python (a 200-step loop)": _python_work,
             **{f"numpy a + b, sum on {n} float32": _numpy_work(n) for n in (400, 936)}}
    probes = {name: {t: probe(work, t, args.seconds / 2) for t in (1, 2, 8)}
              for name, work in works.items()}
    print("\n| work | 1 thread, calls/s | 2 threads vs 1 | 8 threads vs 1 |")
    print("|---|---|---|---|")
    for name, by in probes.items():
        print(f"| {name} | {by[1]:.0f} | {by[2] / by[1]:.2f} | {by[8] / by[1]:.2f} |")
    args.json.write_text(json.dumps({"python": platform.python_version(),
                                     "cores": os.cpu_count(), "rows": rows,
                                     "probes": probes}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

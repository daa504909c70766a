"""Torch ops counted in every thread a run starts, by the livecam function calling them
(``scripts/bench_host.py --ops``): on a GPU each op is about one kernel launch, in a CUDA
graph or not, and a CUDA trace names only kernels. Standalone (no import of the other
scripts), so a test loads it by its path."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any


class ThreadOps:
    """The torch ops every thread started while installed runs (a ``TorchDispatchMode``
    entered in each, through ``threading.setprofile``), counted while :meth:`window` runs, by
    the nearest livecam function that called them and the next livecam function of another
    file above it. On a GPU each op is about one kernel launch, in a CUDA graph or not (the
    same ops on torch's CPU device): what launches the GPU path's kernels, which a CUDA trace
    names only by kernel. Views, aliases and empty tensors are left out (no kernel)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.active = False
        self._lock = threading.Lock()
        checkout = Path(__file__).resolve().parent.parent
        self._root = str(checkout / "livecam")  # the files whose functions are named
        self._cut = len(str(checkout)) + 1  # "livecam/..." of such a file's path
        self._mode: Any = None  # the dispatch mode's class, made by install

    def _count(self, func: Any) -> None:
        if self.active and not func.is_view and "empty" not in func.__name__:
            key = self.caller(sys._getframe(2)) + " | " + func.__name__.split(".")[0]
            with self._lock:
                self.counts[key] = self.counts.get(key, 0) + 1

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        self._mode().__enter__()  # for the rest of this thread's life
        sys.setprofile(None)

    def caller(self, frame: Any) -> str:
        """``file:function`` of the nearest livecam frame, ``< file:function`` of the next
        one in another file."""
        names: list[str] = []
        last_path = ""
        while frame is not None and len(names) < 2:
            path = frame.f_code.co_filename
            if path.startswith(self._root) and path != last_path:
                names.append(f"{path[self._cut:]}:{frame.f_code.co_name}")
                last_path = path
            frame = frame.f_back
        return " < ".join(names) or "(not livecam)"

    def install(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        count = self._count

        class Counting(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                count(func)
                return func(*args, **(kwargs or {}))

        self._mode = Counting
        threading.setprofile(self._hook)

    def uninstall(self) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]

    def window(self, streams: Any, seconds: float, top: int = 40) -> dict[str, Any]:
        """Count for ``seconds``: the ops a frame (every stream's new frames), by caller."""
        before = sum(a.metrics.counters().get("processed", 0) for a in streams.apps)
        self.counts.clear()
        self.active = True
        time.sleep(seconds)
        self.active = False
        frames = sum(a.metrics.counters().get("processed", 0) for a in streams.apps) - before
        per_frame = {k: v / max(frames, 1) for k, v in self.counts.items()}
        by_caller: dict[str, float] = {}
        for key, n in per_frame.items():
            caller = key.split(" | ")[0]
            by_caller[caller] = by_caller.get(caller, 0.0) + n
        return {"frames": frames, "ops_per_frame": sum(per_frame.values()),
                "by_caller": dict(sorted(by_caller.items(), key=lambda kv: -kv[1])[:top]),
                "by_op": dict(sorted(per_frame.items(), key=lambda kv: -kv[1])[:top])}

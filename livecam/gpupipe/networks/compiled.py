"""The face networks (BlazeFace, the face mesh) through ``torch.compile``: Inductor fuses the
ports' hundreds of small kernels (a tflite graph run op by op) into fewer, larger ones.

Measured on the H200 (``scripts/bench_gpu_models.py --compile default``, fp16,
1080p, each call replayed in a CUDA graph): the full-range detector 1.66 → 0.61 ms a frame
(705 → 294 kernels), the mesh 0.82 → 0.27 ms a face; compiling took 18 s and 8 s.

The pipelines call a compiled network exactly as the plain one, and still capture it in their
CUDA graphs (so a frame replays the fused kernels without Python). Inductor's code goes into
the engine cache's Inductor folder (the compiled generator's too), so the first start on a
machine compiles (logged with its time) and a later one takes the code from there: a cache
hit, logged too. Each input shape compiles once, at start (``prepare``), before frames flow.
A module's compiled call for each shape is also saved whole
(:mod:`livecam.gpupipe.networks.precompiled`): a later start loads it without tracing it.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from livecam.engines import compile_progress
from livecam.engines.torch_compiled import inductor_dir
from livecam.gpupipe.networks import dynamic_rows
from livecam.gpupipe.networks.precompiled import FOLDER, PrecompiledCalls
from livecam.gpupipe.networks.precompiled import available as precompiled_available

log = logging.getLogger(__name__)

# one compile at a time (dynamo serialises them anyway), so the cache counters read around a
# first call are that call's, and the environment variable is not set and restored by two
# threads at once
_COMPILING = threading.Lock()

#: shapes one network may be compiled for before dynamo gives up and runs it uncompiled (its
#: default is 8; the streams' detector and mesh each run at several batch buckets)
RECOMPILE_LIMIT = 64


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    def one(value: Any) -> Any:
        shape = getattr(value, "shape", None)
        if shape is not None:
            return (tuple(shape), str(value.dtype), str(value.device))
        if isinstance(value, tuple | list):
            return tuple(one(v) for v in value)
        return value if value is None or isinstance(value, int | float | str | bool) \
            else type(value).__name__

    # a keyword given as None is the call without it (`detector(frames)` and
    # `detector(frames, frame_index=None)` run the same compiled code)
    return tuple(one(a) for a in args) + tuple((k, one(v)) for k, v in sorted(kwargs.items())
                                               if v is not None)


def _reason(exc: BaseException) -> str:
    """The cause in one line: torch wraps a compiler's error in a line of its own
    ("backend='inductor' raised:"), with the cause on the next."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    cause = next((line for line in lines if not line.endswith("raised:")), "")
    return f"{type(exc).__name__}: {cause}"[:300]


class CompiledNetwork:
    """``module`` through ``torch.compile`` (static shapes), its compiled code cached in
    ``cache_dir``. Calls as ``module``; other attributes are ``module``'s. The first call
    with a new input shape compiles (or loads) and logs which it was and how long it took.
    Any thread may call it (the streams share one); first calls take turns. ``knob``: the
    setting that turns this compiling off (said when it fails); ``part``: what the shape plan
    calls it (:mod:`livecam.engines.compile_progress` hears each first call under it;
    default ``name``). ``rows_args``: the positions of the arguments whose first dimension
    counts the call's rows (the faces, or a multiple of them): every count from two up runs
    one compiled call (:mod:`livecam.gpupipe.networks.dynamic_rows`); () : each shape its own."""

    def __init__(self, module: Any, *, cache_dir: Path, name: str,
                 knob: str = "advanced.gpu.compile_networks", part: str = "",
                 rows_args: tuple[int, ...] = ()) -> None:
        import torch
        import torch._dynamo

        limit = torch._dynamo.config
        limit.recompile_limit = max(limit.recompile_limit, RECOMPILE_LIMIT)
        self.module = module
        self.cache_dir = Path(cache_dir)
        self.name = name
        self.knob = knob
        self.part = part or name
        self.rows_args = rows_args
        self._static_rows: set[int] = set()  # counts the dynamic call's guards refused
        self._fn = torch.compile(module, dynamic=False)
        # the call for each input signature seen: a module's call saved whole (see
        # precompiled.py), or ``_fn`` (dynamo's, which keeps its own per-shape code)
        self._calls: dict[tuple[Any, ...], Any] = {}
        self._saved = PrecompiledCalls(module, self.cache_dir / FOLDER, name) \
            if isinstance(module, torch.nn.Module) and precompiled_available() else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        rows = dynamic_rows.row_count(args, self.rows_args)
        dynamic = rows >= 2 and rows not in self._static_rows
        signature = (dynamic_rows.rows_signature(args, kwargs, self.rows_args, _signature)
                     if dynamic else _signature(args, kwargs))
        call = self._calls.get(signature)
        if call is None:
            if self._fn is self.module:
                return self.module(*args, **kwargs)
            with _COMPILING, inductor_dir(self.cache_dir):
                call = self._calls.get(signature)  # another thread's, while this waited
                if call is None:
                    return self._first_call(signature, args, kwargs, dynamic)
        if not dynamic:
            return call(*args, **kwargs)
        try:
            return call(*args, **kwargs)
        except RuntimeError as exc:  # refused before it ran: this count compiles on its own
            if not dynamic_rows.guard_failed(exc):
                raise
            log.info("the %s compiled for any count of rows does not take %d: that count "
                     "compiles on its own", self.name, rows)
            self._static_rows.add(rows)
            return self(*args, **kwargs)

    def _first_call(self, signature: tuple[Any, ...], args: tuple[Any, ...],
                    kwargs: dict[str, Any], dynamic: bool = False) -> Any:
        """Compile (or load) this signature's call, run it, and log which it was
        (``dynamic``: compiled for any row count from two up, see ``rows_args``)."""
        from torch._dynamo.utils import counters

        def now() -> tuple[int, int]:  # read anew: a compile may replace the counters
            c = counters["inductor"]
            return c["fxgraph_cache_hit"], c["fxgraph_cache_miss"]

        shapes = [tuple(a.shape) for a in args if hasattr(a, "shape")]
        if not self._calls:
            log.info("the %s: compiling it, or taking its compiled code from %s (a first "
                     "start compiles: up to half a minute a shape on a GPU)", self.name,
                     self.cache_dir)
        before = now()
        inputs = compile_progress.call_inputs(args, kwargs)
        example = args
        if dynamic:  # compiled from marked views; a loaded call refuses marked tensors
            inputs = (inputs[0], dynamic_rows.DYNAMIC, *inputs[2:])
            example = dynamic_rows.marked(args, self.rows_args)
        compile_progress.started(self.part, inputs)
        t0 = time.perf_counter()
        saved = self._precompiled(signature, example, kwargs, shapes)
        call = saved[0] if saved is not None else self._fn
        try:
            out = call(*(args if saved is not None else example), **kwargs)
        except Exception as exc:  # any compiler failure: run it as it is
            log.warning("could not compile the %s (%s); it runs uncompiled, slower. "
                        "Set %s: false to skip trying", self.name, _reason(exc), self.knob)
            compile_progress.finished(self.part, inputs, "failed", time.perf_counter() - t0)
            self._fn = self.module
            return self.module(*args, **kwargs)
        took = time.perf_counter() - t0
        hits, misses = (a - b for a, b in zip(now(), before, strict=True))
        self._calls[signature] = call
        how = saved[1] if saved is not None else "compiled" if misses else "cached"
        compile_progress.finished(self.part, inputs, how, took)
        if saved is not None and saved[1] != "compiled":
            log.info("the %s for inputs %s: compiled code %s whole (%.1f s)", self.name,
                     shapes, saved[1], took)
        elif misses or saved is not None:
            log.info("compiled the %s for inputs %s in %.1f s (once per machine, torch and "
                     "livecam version: later starts take it from %s)", self.name, shapes, took,
                     self.cache_dir)
        else:
            log.info("the %s for inputs %s: compiled code %s (%.1f s)", self.name, shapes,
                     "taken from the cache" if hits else "reused", took)
        return out

    def _precompiled(self, signature: tuple[Any, ...], args: tuple[Any, ...],
                     kwargs: dict[str, Any], shapes: list[Any]) -> tuple[Any, str] | None:
        """(the call saved whole for this signature, how it came: see
        :meth:`PrecompiledCalls.get`), or None: the dynamo path, as before (the log says
        why)."""
        if self._saved is None:
            return None
        try:
            return self._saved.get(signature, args, kwargs)
        except Exception as exc:  # a graph break, an op torch cannot save: trace as before
            log.info("the %s for inputs %s cannot be saved whole (%s): it is traced at each "
                     "start", self.name, shapes, _reason(exc))
            return None

    def __getattr__(self, name: str) -> Any:
        if name == "module":  # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.module, name)


def _device_type(module: Any) -> str:
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    return "cpu" if first is None else str(first.device.type)


def triton_install_hint() -> str:
    """What brings Triton on this platform (``livecam doctor`` says it too)."""
    return {"win32": "pip install triton-windows",
            "darwin": "no CUDA on macOS: the CPU path runs there"}.get(sys.platform,
                                                                       "pip install triton")


def maybe_compiled(module: Any, cache_dir: Path | None, name: str, *,
                   device_type: str | None = None, knob: str = "advanced.gpu.compile_networks",
                   part: str = "", rows_args: tuple[int, ...] = ()) -> Any:
    """``module`` (a torch module, or a function of tensors on ``device_type``) compiled with
    its code cached in ``cache_dir``, or as it is when None, or when it is on CUDA and Triton
    (Inductor's GPU compiler) is not installed: said in the log. Linux wheels of torch bring
    Triton; Windows and macOS ones do not (on Windows the ``triton-windows`` package provides
    it). ``knob``: the setting that turns this compiling off (said in those lines);
    ``part``, ``rows_args``: see :class:`CompiledNetwork`."""
    if cache_dir is None:
        return module
    device = device_type or _device_type(module)
    if device == "cuda" and importlib.util.find_spec("triton") is None:
        log.warning("the %s runs uncompiled (slower): torch.compile needs Triton on a GPU, "
                    "which is not installed (%s), or set %s: false",
                    name, triton_install_hint(), knob)
        return module
    return CompiledNetwork(module, cache_dir=cache_dir, name=name, knob=knob, part=part,
                           rows_args=rows_args)


_KEPT: dict[tuple[Any, ...], Any] = {}
_KEPT_LOCK = threading.Lock()


def compiled_once(key: tuple[Any, ...], make: Callable[[], Any], cache_dir: Path | None,
                  name: str, *, part: str = "", rows_args: tuple[int, ...] = ()) -> Any:
    """``make()`` through :func:`maybe_compiled`, made once per process for ``key`` (what
    the module is: model, settings, device, dtype): a stream's chain rebuilt by a config
    reload, or another set of streams, calls the same compiled network, whose shapes are
    compiled already, instead of tracing them again. The networks' weights never change, so
    sharing them is safe; they stay on the device until the process ends (a few MB).
    Uncompiled (``cache_dir`` None): a new module each call, as before. ``part``,
    ``rows_args``: see :class:`CompiledNetwork` (``rows_args`` is part of the key)."""
    if cache_dir is None:
        return make()
    full = (*key, str(cache_dir), rows_args)
    with _KEPT_LOCK:
        net = _KEPT.get(full)
        if net is None:
            net = _KEPT[full] = maybe_compiled(make(), cache_dir, name, part=part,
                                               rows_args=rows_args)
        return net

"""The compiled generator: the ONNX executor flattened per fixed batch and compiled with
``torch.compile`` (Inductor), its compiled code kept in the engine cache's Inductor folder, so a
later start finds it there and does not compile again.

Why this route (measured on the H200):

- The first route was an AOTInductor package (``aoti_compile_and_package``), the cleanest
  artefact: on the CPU it opens without tracing. But on the H200 test machine (torch
  2.11.0+cu130) every CUDA package crashed the process with SIGSEGV when opened, even a
  two-layer conv net, through the package loader and through the model-container runner alike
  (``scripts/probe_aoti.py`` shows it). A loader that crashes on the one GPU
  this project can test is no product path.
- ``torch.compile`` with a persistent ``TORCHINDUCTOR_CACHE_DIR`` runs the same Inductor
  kernels through the JIT path that works there. A later start re-traces with dynamo (the
  flattened graph: seconds) and takes the compiled graph from Inductor's FX graph cache.

Steps of a build (:func:`build_compiled`, run by ``livecam engines build``): the executor runs
once eagerly (filling its shape-only device tensors), ``make_fx`` flattens it to one graph of
aten ops for the batch (host shape reads become constants: compiled directly, dynamo splits the
executor into 29 graphs), ``torch.compile`` compiles and runs it once (fp16 + channels_last on
CUDA, optionally max-autotune; fp32 on the CPU) with the Inductor cache pointed into the
engine cache, and a small entry records the flattened graph's digest under a
:class:`CompiledKey`. A start (:func:`load_compiled`) flattens again, checks the digest, and
compiles with the same cache: a hit. Should Inductor miss anyway, it compiles there and says so
in the log with the time it took. One compiled graph per batch size; a call with another batch
runs in the next larger one, padded with zero rows (or in chunks of the largest).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livecam.core.errors import ModelError
from livecam.engines.engine_cache import CompiledKey, EngineCache

log = logging.getLogger(__name__)

ProgressFn = Callable[[str], None]

# the modules whose code ends up in a flattened graph: a change to any of them invalidates
EXECUTOR_MODULES = ("torch_opset", "torch_ops", "torch_ops_nn", "torch_resize", "torch_fuse",
                    "torch_graph", "torch_compiled")


def executor_sha256() -> str:
    """sha256 over the executor's source files (part of every :class:`CompiledKey`)."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in EXECUTOR_MODULES:
        digest.update((here / f"{name}.py").read_bytes())
    return digest.hexdigest()


def power_of_two_batches(largest: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to and including ``largest`` (the batch sizes built by default)."""
    out = [1]
    while out[-1] < largest:
        out.append(min(out[-1] * 2, largest))
    return tuple(out)


def device_identity(device: Any) -> str:
    """What generated code depends on: GPU name and compute capability, or the CPU's
    architecture and the vector ISA torch compiles for."""
    import torch

    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return f"{torch.cuda.get_device_name(index)} sm{major}.{minor}"
    return f"cpu {platform.machine()} {torch.backends.cpu.get_cpu_capability()}"


def _triton_version(device: Any) -> str:
    if device.type != "cuda":
        return ""
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class CompileOptions:
    """How :class:`~livecam.engines.torch_engine.TorchEngine` finds (or builds) its compiled
    packages: in ``cache_dir`` under ``model_name``, one per entry of ``batch_sizes``.
    ``required`` (``advanced.engine.torch_mode: compiled``) makes a missing package an error naming
    ``livecam engines build``; otherwise the engine falls back to CUDA graphs / eager and logs
    why. ``build_if_missing`` compiles missing packages in ``open`` (minutes, logged)."""

    cache_dir: Path
    model_name: str
    model_sha256: str
    batch_sizes: tuple[int, ...]
    max_autotune: bool = False
    required: bool = False
    build_if_missing: bool = False

    def key(self, device: Any, precision: str, channels_last: bool, batch: int) -> CompiledKey:
        import torch

        cuda = device.type == "cuda"
        return CompiledKey(
            model_sha256=self.model_sha256, device=device_identity(device),
            torch_version=str(torch.__version__), triton_version=_triton_version(device),
            precision=precision, batch=batch, channels_last=channels_last,
            max_autotune=self.max_autotune and cuda,  # on the CPU it only slows the build
            executor_sha256=executor_sha256())


def example_inputs(module: Any, specs: Any, batch: int, device: Any,
                   channels_last: bool) -> list[Any]:
    """Random inputs of the graph's shapes at ``batch`` (floats in the module's dtype)."""
    import torch

    gen = torch.Generator().manual_seed(batch)
    out = []
    for spec in specs:
        shape = (batch, *[d if isinstance(d, int) and d > 0 else 1 for d in spec.shape[1:]])
        t = torch.rand(shape, generator=gen).to(device, module.float_dtype)
        if channels_last and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        out.append(t)
    return out


INDUCTOR_DIR = "inductor"


@contextmanager
def inductor_dir(path: Path) -> Iterator[None]:
    """Inductor's caches in ``path`` while the block runs (the environment variable is read
    at each cache access); an outer setting of the user's is put back afterwards."""
    import os

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


def inductor_cache(cache: EngineCache) -> Any:
    """:func:`inductor_dir` in the engine cache's Inductor folder (``cache.root/inductor``)."""
    return inductor_dir(cache.root / INDUCTOR_DIR)


def flatten(module: Any, inputs: list[Any]) -> Any:
    """The executor as one FX graph of aten ops for these input shapes."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    with torch.no_grad():
        module(*inputs)  # eager: shape-only device tensors are made now, constants below
        return make_fx(module, tracing_mode="real")(*inputs)


def graph_digest(flat: Any) -> str:
    """sha256 of the flattened graph's code and its constants' shapes and dtypes."""
    digest = hashlib.sha256(flat.code.encode())
    for name, value in sorted(flat.state_dict().items()):
        digest.update(f"{name}:{tuple(value.shape)}:{value.dtype}".encode())
    return digest.hexdigest()


@dataclass
class CompileCount:
    """Inductor's FX graph cache over one compile: hits, misses and bypasses."""

    hits: int = 0
    misses: int = 0
    bypasses: int = 0


def compile_flat(flat: Any, inputs: list[Any], max_autotune: bool) -> tuple[Any, CompileCount]:
    """``torch.compile`` the flattened graph and run it once (the compile happens there)."""
    import torch
    from torch._dynamo.utils import counters

    def now() -> tuple[int, int, int]:
        c = counters["inductor"]
        return c["fxgraph_cache_hit"], c["fxgraph_cache_miss"], c["fxgraph_cache_bypass"]

    before = now()
    fn = torch.compile(flat, fullgraph=True, dynamic=False,
                       mode="max-autotune-no-cudagraphs" if max_autotune else None)
    # the engine calls it in inference mode (dynamo guards on that mode, and Inductor's cache
    # key holds it): compiled any other way, the first frame would compile it again
    with torch.inference_mode():
        fn(*[t.clone() for t in inputs])
    after = now()
    return fn, CompileCount(*(a - b for a, b in zip(after, before, strict=True)))


def build_compiled(module: Any, specs: Any, *, cache: EngineCache, model_name: str,
                   key: CompiledKey, device: Any,
                   progress: ProgressFn | None = None) -> Path:
    """Flatten and compile ``module`` (an open ``OnnxGraphModule`` on ``device``, in the key's
    precision and layout) for ``key.batch`` into the engine cache; return the entry's path."""
    say = progress or (lambda _text: None)
    inputs = example_inputs(module, specs, key.batch, device, key.channels_last)
    t0 = time.perf_counter()
    flat = flatten(module, inputs)
    say(f"traced {len(flat.graph.nodes)} nodes ({time.perf_counter() - t0:.1f} s)")
    t1 = time.perf_counter()
    with inductor_cache(cache):
        _fn, count = compile_flat(flat, inputs, key.max_autotune)
    if count.bypasses:
        raise ModelError(f"torch could not cache the compiled {model_name} (Inductor bypassed "
                         "its FX graph cache), so every start would compile it again; set "
                         "advanced.engine.torch_mode: cuda_graphs")
    say(f"compiled ({time.perf_counter() - t1:.1f} s)")
    entry = json.dumps({"graph_sha256": graph_digest(flat), "inductor_dir": INDUCTOR_DIR})
    return cache.save(model_name, key, entry.encode())


class CompiledModule:
    """Per-batch compiled graphs behind the executor's call: ``module(*inputs)`` returns
    one tensor per graph output. A batch without its own graph runs in the next larger one
    (zero rows appended, results cut) or in chunks of the largest. Inputs are made contiguous
    in the layout the graphs were compiled for. Only one thread calls it (the pipeline's)."""

    def __init__(self, runners: dict[int, Any], *, channels_last: bool) -> None:
        self.runners = dict(sorted(runners.items()))
        self.channels_last = channels_last

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        import torch

        n = int(inputs[0].shape[0])
        batch = next((b for b in self.runners if b >= n), None)
        if batch is None:  # more rows than the largest graph: run it chunk by chunk
            largest = max(self.runners)
            parts = [self(*[t[i:i + largest] for t in inputs]) for i in range(0, n, largest)]
            return tuple(torch.cat(outs) for outs in zip(*parts, strict=True))
        ready = []
        # inference tensors laid out as compiled (compile_flat): dynamo guards on how a tensor
        # was made, and a guard that fails compiles again on the first frame; a tensor made
        # outside inference mode is copied, one made inside is used as it is
        with torch.inference_mode():
            for t in inputs:
                if batch > n:
                    t = torch.cat([t, t.new_zeros((batch - n, *t.shape[1:]))])
                layout = torch.channels_last if self.channels_last and t.dim() == 4 \
                    else torch.contiguous_format
                t = t.contiguous(memory_format=layout)
                ready.append(t if t.is_inference() else t.clone())
            outs = self.runners[batch](*ready)
        return tuple(o[:n] if batch > n else o for o in outs)

    # the engine's CUDA-graph capture asks the executor to record / replay host reads; a
    # compiled graph has none
    @contextmanager
    def recording_host_values(self) -> Iterator[dict[Any, Any]]:
        yield {}

    @contextmanager
    def replaying_host_values(self, _record: dict[Any, Any]) -> Iterator[None]:
        yield


def load_compiled(entries: dict[int, Path], module: Any, specs: Any, *, cache: EngineCache,
                  keys: dict[int, CompiledKey], device: Any, model_name: str,
                  progress: ProgressFn | None = None) -> CompiledModule:
    """The compiled graphs for the batches in ``entries`` (batch -> cache entry), from
    Inductor's cache. Raises :class:`ModelError` when the executor's flattened graph is not
    the one that was built (rebuild); logs a warning when Inductor compiled anyway."""
    say = progress or (lambda _text: None)
    runners = {}
    channels_last = False
    for batch, path in entries.items():
        key = keys[batch]
        channels_last = key.channels_last
        built = json.loads(path.read_text())
        inputs = example_inputs(module, specs, batch, device, key.channels_last)
        flat = flatten(module, inputs)
        if built.get("graph_sha256") != graph_digest(flat):
            raise ModelError(f"the compiled {model_name} for batch {batch} was built from "
                             "another graph: run `livecam engines build "
                             f"{model_name}` again")
        t0 = time.perf_counter()
        with inductor_cache(cache):
            runners[batch], count = compile_flat(flat, inputs, key.max_autotune)
        took = time.perf_counter() - t0
        if count.misses or count.bypasses:
            log.warning("%s batch %d: torch did not find its compiled code in %s and compiled "
                        "it again (%.0f s); `livecam engines build %s` refreshes the cache",
                        model_name, batch, cache.root / INDUCTOR_DIR, took, model_name)
        else:
            say(f"batch {batch}: loaded from the cache ({took:.1f} s)")
    return CompiledModule(runners, channels_last=channels_last)


def missing_build_error(options: CompileOptions, key: CompiledKey, missing: list[int]
                        ) -> ModelError:
    return ModelError(
        f"no compiled {options.model_name} for batch {', '.join(map(str, missing))} on "
        f"{key.device} (torch {key.torch_version}, {key.precision}): run `livecam engines "
        f"build {options.model_name}` first (minutes), or set advanced.engine.torch_mode: "
        "cuda_graphs (or advanced.engine.build_if_missing: true to compile at start)")

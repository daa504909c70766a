"""The compiled generator: the ONNX executor flattened per fixed batch and compiled ahead of
time with AOTInductor, stored in the engine cache, loaded in seconds without compiling.

Why this route (measured on the CPU with the small stand-in, docs/perf-notes.md): an
AOTInductor package (``torch._inductor.aoti_compile_and_package``) holds the generated kernels,
the compiled wrapper and the weights; ``aoti_load_package`` opens it without tracing or
compiling anything. ``torch.compile`` with ``torch.compiler.save_cache_artifacts`` /
``load_cache_artifacts`` (the FX graph and autotune caches) still re-traces with dynamo and
re-runs parts of the compiler at every start (47 s cold, 35 s "warm" there), so it would
compile in the live path.

Steps of a build (:func:`build_compiled`, run by ``livecam engines build``): the executor runs
once eagerly (filling its shape-only device tensors), ``make_fx`` flattens it to one graph of
aten ops for the batch (host shape reads become constants: compiled directly, dynamo splits the
executor into 29 graphs), ``torch.export`` makes an ExportedProgram of it, AOTInductor compiles
it (fp16 + channels_last on CUDA, optionally max-autotune; fp32 on the CPU) into a ``.pt2``
package, and the package is moved into the cache under a :class:`CompiledKey`. One package per
batch size; a call with another batch runs in the next larger package, padded with zero rows
(or in chunks of the largest).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import platform
import shutil
import subprocess
import sys
import time
import zipfile
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
    ``required`` (``engine.torch_mode: compiled``) makes a missing package an error naming
    ``livecam engines build``; otherwise the engine falls back to CUDA graphs / eager and logs
    why. ``build_if_missing`` compiles missing packages in ``open`` (minutes, logged)."""

    cache_dir: Path
    model_name: str
    model_sha256: str
    batch_sizes: tuple[int, ...]
    max_autotune: bool = True
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


def build_compiled(module: Any, specs: Any, *, cache: EngineCache, model_name: str,
                   key: CompiledKey, device: Any,
                   progress: ProgressFn | None = None) -> Path:
    """Flatten, export and compile ``module`` (an open ``OnnxGraphModule`` on ``device``, in
    the key's precision and layout) for ``key.batch``; store the package; return its path."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    say = progress or (lambda _text: None)
    inputs = example_inputs(module, specs, key.batch, device, key.channels_last)
    t0 = time.perf_counter()
    with torch.no_grad():
        module(*inputs)  # eager: shape-only device tensors are made now, constants below
        flat = make_fx(module, tracing_mode="real")(*inputs)
        say(f"traced {len(flat.graph.nodes)} nodes ({time.perf_counter() - t0:.1f} s)")
        exported = torch.export.export(flat, tuple(inputs), strict=False)
    scratch = cache.scratch_dir()
    try:
        t1 = time.perf_counter()
        package = torch._inductor.aoti_compile_and_package(
            exported, package_path=str(scratch / "model.pt2"),
            inductor_configs={"max_autotune": key.max_autotune})
        say(f"compiled ({time.perf_counter() - t1:.1f} s)")
        return cache.save_file(model_name, key, Path(package))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class CompiledModule:
    """Per-batch AOTInductor runners behind the executor's call: ``module(*inputs)`` returns
    one tensor per graph output. A batch without its own package runs in the next larger one
    (zero rows appended, results cut) or in chunks of the largest. Inputs are made contiguous
    in the layout the packages were built for. Only one thread calls it (the pipeline's)."""

    def __init__(self, runners: dict[int, Any], *, channels_last: bool) -> None:
        self.runners = dict(sorted(runners.items()))
        self.channels_last = channels_last

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        import torch

        n = int(inputs[0].shape[0])
        batch = next((b for b in self.runners if b >= n), None)
        if batch is None:  # more rows than the largest package: run it chunk by chunk
            largest = max(self.runners)
            parts = [self(*[t[i:i + largest] for t in inputs]) for i in range(0, n, largest)]
            return tuple(torch.cat(outs) for outs in zip(*parts, strict=True))
        ready = []
        for t in inputs:
            if batch > n:
                t = torch.cat([t, t.new_zeros((batch - n, *t.shape[1:]))])
            layout = torch.channels_last if self.channels_last and t.dim() == 4 \
                else torch.contiguous_format
            ready.append(t.contiguous(memory_format=layout))
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


#: Seconds a child process may take to open one package (its import of torch included).
PROBE_TIMEOUT_S = 300.0


def probe_load(path: Path, device_index: int) -> None:
    """Open ``path`` once in a child process before this process does; raise
    :class:`ModelError` when that fails or crashes.

    On the H200 test machine (torch 2.11.0+cu130) ``aoti_load_package`` of a CUDA package
    killed the process with a segmentation fault, whatever its options: a crash there would
    take the live run down with it. The verdict is remembered beside the package for this
    torch version (the package is keyed by it too), so later starts skip the probe: a success
    opens at once, a failure is the same error at once.
    """
    import torch

    marker = path.with_name(path.name + ".opens")
    verdict = marker.read_text() if marker.exists() else ""
    if verdict == torch.__version__:
        return
    failed = f"fails {torch.__version__}\n"
    if verdict.startswith(failed):
        raise ModelError(verdict[len(failed):])
    code = ("import sys, torch; from livecam.engines.torch_compiled import open_runner; "
            "i = int(sys.argv[2]); "
            "open_runner(sys.argv[1], torch.device('cuda', i) if i >= 0 else torch.device('cpu'))")
    try:
        result = subprocess.run([sys.executable, "-c", code, str(path), str(device_index)],
                                capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ModelError(f"opening the compiled package {path.name} took over "
                         f"{PROBE_TIMEOUT_S:.0f} s in a probe process; set engine.torch_mode: "
                         "cuda_graphs") from exc
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        how = (f"crashed (signal {-result.returncode})" if result.returncode < 0
               else f"failed (exit {result.returncode}: {last})")
        message = (f"torch {torch.__version__} could not open the compiled package "
                   f"{path.name}: a probe process {how}; set engine.torch_mode: cuda_graphs "
                   "(or rebuild it with another torch)")
        marker.write_text(failed + message)
        raise ModelError(message)
    marker.write_text(torch.__version__)


def open_runner(path: str | Path, device: Any) -> Callable[..., list[Any]]:
    """Open the shared library inside an AOTInductor package with the model-container runner
    itself, not the package loader: the package is unzipped (once, beside it) in Python and
    its ``.so`` handed to ``AOTIModelContainerRunnerCuda``/``Cpu``. Returns ``run(*tensors)``
    -> list of output tensors."""
    import torch

    path = Path(path)
    folder = path.with_name(path.name + ".unpacked")
    if not folder.exists():
        scratch = path.with_name(path.name + f".unpacking-{time.time_ns()}")
        with zipfile.ZipFile(path) as archive:
            archive.extractall(scratch)
        try:
            scratch.rename(folder)
        except OSError:  # another process unpacked it first
            shutil.rmtree(scratch, ignore_errors=True)
    libraries = sorted(folder.glob("*/data/aotinductor/*/*.so"))
    if len(libraries) != 1:
        raise ModelError(f"the compiled package {path.name} holds {len(libraries)} shared "
                         "libraries, expected 1: rebuild it with `livecam engines build`")
    so = libraries[0]
    if device.type == "cuda":
        runner = torch._C._aoti.AOTIModelContainerRunnerCuda(
            str(so), 1, f"cuda:{device.index or 0}", str(so.parent))
    else:
        runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(so), 1)

    def run(*inputs: Any) -> list[Any]:
        return list(runner.run(list(inputs)))

    return run


def load_compiled(paths: dict[int, Path], device: Any, channels_last: bool) -> CompiledModule:
    """Open the packages (no compiling); ``paths`` maps batch size to package. Each is first
    opened in a child process (:func:`probe_load`): raises :class:`ModelError` if that fails."""

    index = (device.index or 0) if device.type == "cuda" else -1
    for path in paths.values():
        probe_load(path, index)
    runners = {b: open_runner(p, device) for b, p in paths.items()}
    return CompiledModule(runners, channels_last=channels_last)


def missing_build_error(options: CompileOptions, key: CompiledKey, missing: list[int]
                        ) -> ModelError:
    return ModelError(
        f"no compiled {options.model_name} for batch {', '.join(map(str, missing))} on "
        f"{key.device} (torch {key.torch_version}, {key.precision}): run `livecam engines "
        f"build {options.model_name}` first (minutes), or set engine.torch_mode: cuda_graphs "
        "(or engine.compile_if_missing: true to compile at start)")

"""A network's compiled call kept whole on disk, so a later start skips tracing it.

Inductor's cache (``TORCHINDUCTOR_CACHE_DIR``) keeps the generated kernels, but a later start
still traces each network and input shape through dynamo before it finds them there: on the
H200 host that was 1-9 s a shape, about 60 s of a 72 s start (timed by ``livecam``'s
INFO lines). torch's precompiling (``torch._dynamo.aot_compile``, experimental in torch 2.10
and later) saves the traced call with its guards and kernels in one file; loading it skips
dynamo (the full-range BlazeFace on a 2-core CPU: 12.4 s traced from the cache, 2.2 s
loaded; on the H200: 7.0 → 4.4 s, the swap's alignment 1-2 → 0.1 s a shape).

A file is found by what makes its code right: the network's name, its weights, the input
shapes and every other argument, the torch version, the device, and livecam's own source
(any change to it writes new files). Anything that fails (a torch without it, a network that
cannot be traced whole, a damaged file) is logged and the caller compiles as before. The
files are trusted as Inductor's own cache beside them is (both hold code that runs): they
live in the user's engine cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: the folder beside Inductor's own cache files
FOLDER = "precompiled"


@functools.cache
def source_digest() -> str:
    """sha256 of livecam's Python files (names and text): the code the traces came from."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def settings_digest(module: Any) -> str:
    """sha256 of what ``module`` computes with: its parameters and buffers (names, dtypes,
    shapes, values) and every module's public settings (numbers, names, arrays, the objects
    it holds one level down: a bound swapper's template and sizes), which a trace may keep
    as constants."""
    import numpy as np
    import torch

    digest = hashlib.sha256()

    def feed(value: Any, depth: int) -> None:
        if isinstance(value, torch.Tensor | np.ndarray):
            array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(np.ascontiguousarray(array).view(np.uint8).tobytes())
        elif value is None or isinstance(value, int | float | str | bool):
            digest.update(repr(value).encode())
        elif isinstance(value, tuple | list):
            for item in value:
                feed(item, depth)
        elif callable(value) and hasattr(value, "__qualname__"):
            digest.update(f"{value.__module__}.{value.__qualname__}".encode())
        elif depth > 0 and hasattr(value, "__dict__"):
            for name, item in sorted(vars(value).items()):
                if not name.startswith("__"):
                    digest.update(name.encode())
                    feed(item, depth - 1)
        else:
            digest.update(type(value).__qualname__.encode())

    with torch.no_grad():
        for name, tensor in sorted(module.state_dict().items()):
            digest.update(name.encode())
            feed(tensor, 0)
        for name, sub in module.named_modules():
            digest.update(f"{name}:{type(sub).__qualname__}".encode())
            for key, value in sorted(vars(sub).items()):
                if not key.startswith("_") and not isinstance(value, torch.nn.Module):
                    digest.update(key.encode())
                    feed(value, 1)
    return digest.hexdigest()


def _device_name() -> str:
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} sm{torch.cuda.get_device_capability()}"
    return "cpu"


def available() -> bool:
    """Whether this torch can save and load compiled calls."""
    import torch._dynamo.config as config
    from torch._dynamo.eval_frame import OptimizedModule

    return hasattr(config, "enable_aot_compile") and hasattr(OptimizedModule, "_aot_compile")


class PrecompiledCalls:
    """``module``'s compiled calls in ``folder``: :meth:`get` returns the call for one input
    signature, loaded from its file, or compiled and saved there first. A call torch cannot
    save or load whole leaves a ``.cannot`` file with the reason, and later starts do not
    try it again (they trace it, as before)."""

    def __init__(self, module: Any, folder: Path, name: str) -> None:
        self.module = module
        self.folder = Path(folder)
        self.name = name
        import torch

        self._key = "|".join((name, settings_digest(module), source_digest(),
                              str(torch.__version__), _device_name()))

    def path(self, signature: tuple[Any, ...]) -> Path:
        """The file for calls with this signature."""
        digest = hashlib.sha256(f"{self._key}|{signature!r}".encode()).hexdigest()[:32]
        return self.folder / f"{digest}.bin"

    def get(self, signature: tuple[Any, ...], args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> tuple[Any, str]:
        """(the compiled call, how it came: "loaded", "reused" or "compiled") for these
        example inputs; raises what torch raised when it can neither load nor compile it.
        Loaded once per process: another module with the same key (another stream's swap
        program) calls the same compiled code on itself."""
        path = self.path(signature)
        cannot = path.with_suffix(".cannot")
        with _LOADED_LOCK:
            compiled, how = _LOADED.get(str(path)), "reused"
        if compiled is None and cannot.is_file():  # an earlier start failed: do not retry
            raise RuntimeError(cannot.read_text(errors="replace").strip())
        if compiled is None and path.is_file():
            compiled, how = self._load(path, cannot), "loaded"
        if compiled is None:
            compiled, how = self._compile(path, cannot, args, kwargs), "compiled"
        with _LOADED_LOCK:
            _LOADED[str(path)] = compiled
        # the compiled code, called on this module (its own swapper, its own weights' tensors)
        return type(compiled)(self.module, compiled.compiled_results), how

    def _load(self, path: Path, cannot: Path) -> Any:
        """The file's compiled code, or None when its bytes are damaged (compile anew)."""
        try:
            return self._deserialize(path.read_bytes())
        except Exception as exc:
            if not _damaged(exc):  # it loads nowhere: say so once, for later starts
                _note(cannot, exc)
                raise
            log.warning("the %s's saved compiled code in %s could not be loaded (%s): "
                        "compiling it again", self.name, path, exc)
            return None

    def _deserialize(self, data: bytes) -> Any:
        """torch's ``AOTCompiledModel.deserialize`` (what ``_load_aot_compiled_module``
        calls), given the forward's module globals: a saved call whose code names one (the
        tile detector's, on the H200, named ``torch``) is refused by torch's own loader
        ("Missing required external references", torch 2.11 and 2.13), which passes none."""
        import pickle

        import torch._dynamo.config as config
        from torch._dynamo import convert_frame
        from torch._dynamo.aot_compile import AOTCompiledFunction, AOTCompiledModel
        from torch._dynamo.utils import get_metrics_context
        from torch._guards import CompileContext, compile_context

        config.enable_aot_compile = True
        f_globals = getattr(type(self.module).forward, "__globals__", None)
        functions = []
        for result in pickle.loads(data):
            with compile_context(CompileContext(convert_frame.get_compile_id({}))), \
                    get_metrics_context():
                functions.append(AOTCompiledFunction.deserialize(result, f_globals))
        return AOTCompiledModel(self.module, functions)

    def _compile(self, path: Path, cannot: Path, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        """Compile for these inputs and save the result to ``path``, whole or not at all (a
        kill mid-write leaves a ``.part`` file, never a half ``.bin``)."""
        import torch
        import torch._dynamo.config as config
        from torch._dynamo.aot_compile import ModelInput

        config.enable_aot_compile = True
        call: Any = torch.compile(self.module, fullgraph=True, dynamic=False)
        partial = path.with_suffix(f".{os.getpid()}.part")
        try:
            call._aot_compile([ModelInput(args, {k: v for k, v in kwargs.items()
                                                 if v is not None}, [])])
            self.folder.mkdir(parents=True, exist_ok=True)
            call._save_aot_compiled_module(str(partial))
        except Exception as exc:
            _note(cannot, exc)
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, path)
        return call.forward


def _damaged(exc: Exception) -> bool:
    """Whether a load failed on the file's bytes (cut short, overwritten), which compiling
    again mends, rather than on what it holds (torch cannot rebuild it: do not retry)."""
    import pickle

    return isinstance(exc, EOFError | pickle.UnpicklingError | ValueError)


def _note(cannot: Path, exc: Exception) -> None:
    """Remember, beside the file it would have been, why a call cannot be saved or loaded
    whole: later starts trace it (Inductor's cache still holds its kernels)."""
    from livecam.core.files import atomic_write

    with contextlib.suppress(OSError):  # a folder that cannot be written: retried next start
        atomic_write(cannot, (f"{type(exc).__name__}: {exc}"[:500] + "\n").encode())


#: each file's compiled code, once per process (path -> torch's AOTCompiledModel)
_LOADED: dict[str, Any] = {}
_LOADED_LOCK = threading.Lock()

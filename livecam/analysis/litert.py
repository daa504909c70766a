"""LiteRT (``ai-edge-litert``): runs the ``.tflite`` models inside mediapipe directly.

Both the face mesh (``mesh.py``) and the detector (``blazeface_lite.py``) take this path when
LiteRT can be imported, and MediaPipe's own graphs otherwise.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from livecam.core.errors import DependencyError


def litert_interpreter() -> Any:
    """LiteRT's ``Interpreter`` class, or None where ``ai-edge-litert`` cannot be imported."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return None
    return Interpreter


#: Environment variable naming a copy of mediapipe's ``modules`` folder (a GPU server without
#: mediapipe: ``scripts/device/export_bench_assets.py`` writes one).
MODULES_ENV = "LIVECAM_MEDIAPIPE_MODULES"


def mediapipe_dir() -> Path:
    """The installed mediapipe package's folder, found without importing it: the package
    imports its whole framework (40-50 MB resident and half a second), while livecam reads
    only its model files and one module of plain data (``livecam.swap.mesh``). Raises
    :class:`DependencyError` where mediapipe is not installed."""
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or not spec.submodule_search_locations:
        raise DependencyError("mediapipe is not installed: `pip install mediapipe==0.10.21` "
                              f"(it ships the face models), or set {MODULES_ENV} to a copy of "
                              "its mediapipe/modules folder")
    return Path(next(iter(spec.submodule_search_locations)))


def mediapipe_modules_dir() -> Path:
    """``mediapipe/modules`` of the installed mediapipe, or ``$LIVECAM_MEDIAPIPE_MODULES``
    where that is set."""
    override = os.environ.get(MODULES_ENV)
    return Path(override) if override else mediapipe_dir() / "modules"


def mediapipe_model_path(module: str, filename: str) -> str:
    """``<modules>/<module>/<filename>`` of :func:`mediapipe_modules_dir`."""
    return os.fspath(mediapipe_modules_dir() / module / filename)


def open_mediapipe_model(module: str, filename: str, num_threads: int) -> Any:
    """An allocated interpreter for :func:`mediapipe_model_path`."""
    path = mediapipe_model_path(module, filename)
    net = litert_interpreter()(model_path=path, num_threads=max(1, num_threads))
    net.allocate_tensors()
    return net

"""LiteRT (``ai-edge-litert``): runs the ``.tflite`` models inside mediapipe directly.

Both the face mesh (``mesh.py``) and the detector (``blazeface_lite.py``) take this path when
LiteRT can be imported, and MediaPipe's own graphs otherwise.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any


def litert_interpreter() -> Any:
    """LiteRT's ``Interpreter`` class, or None where ``ai-edge-litert`` cannot be imported."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return None
    return Interpreter


def mediapipe_dir() -> str:
    """The installed mediapipe package's folder, found without importing it: the package
    imports its whole framework (about 60 MB resident and half a second), while livecam reads
    only its model files and one module of plain data (``livecam.swap.mesh``)."""
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("mediapipe is not installed: pip install mediapipe==0.10.21")
    return str(next(iter(spec.submodule_search_locations)))


def mediapipe_model_path(module: str, filename: str) -> str:
    """``mediapipe/modules/<module>/<filename>``, or ``$LIVECAM_MEDIAPIPE_MODULES/<module>/
    <filename>`` where that is set (a machine without mediapipe, e.g. a GPU server running
    triton client streams in a benchmark)."""
    modules = os.environ.get("LIVECAM_MEDIAPIPE_MODULES") or os.path.join(mediapipe_dir(),
                                                                         "modules")
    return os.path.join(modules, module, filename)


def open_mediapipe_model(module: str, filename: str, num_threads: int) -> Any:
    """An allocated interpreter for :func:`mediapipe_model_path`."""
    path = mediapipe_model_path(module, filename)
    net = litert_interpreter()(model_path=path, num_threads=max(1, num_threads))
    net.allocate_tensors()
    return net

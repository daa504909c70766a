"""LiteRT (``ai-edge-litert``): runs the ``.tflite`` models inside mediapipe directly.

Both the face mesh (``mesh.py``) and the detector (``blazeface_lite.py``) take this path when
LiteRT can be imported, and MediaPipe's own graphs otherwise.
"""

from __future__ import annotations

import os
from typing import Any


def litert_interpreter() -> Any:
    """LiteRT's ``Interpreter`` class, or None where ``ai-edge-litert`` cannot be imported."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return None
    return Interpreter


def open_mediapipe_model(module: str, filename: str, num_threads: int) -> Any:
    """An allocated interpreter for ``mediapipe/modules/<module>/<filename>``, or for
    ``$LIVECAM_MEDIAPIPE_MODULES/<module>/<filename>`` where that is set (a machine without
    mediapipe, e.g. a GPU server running triton client streams in a benchmark)."""
    modules = os.environ.get("LIVECAM_MEDIAPIPE_MODULES")
    if not modules:
        import mediapipe as mp

        modules = os.path.join(os.path.dirname(mp.__file__), "modules")
    path = os.path.join(modules, module, filename)
    net = litert_interpreter()(model_path=path, num_threads=max(1, num_threads))
    net.allocate_tensors()
    return net

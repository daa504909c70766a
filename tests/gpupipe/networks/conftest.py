"""Fixtures for the torch ports of MediaPipe's face models.

The reference is MediaPipe itself (installed mediapipe==0.10.21, on the CPU): its python
solutions end to end, and, for network-level checks, a tiny graph of MediaPipe's own
``ImageToTensorCalculator`` -> ``InferenceCalculator`` (TFLite) -> ``TensorsToFloatsCalculator``
so both sides see an identical input tensor.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

MpRun = Callable[..., list[np.ndarray]]


def _graph(config: str, image_rgb: np.ndarray, outputs: list[str]) -> list[np.ndarray]:
    import mediapipe as mp
    from mediapipe.python._framework_bindings import resource_util

    from livecam.gpupipe.networks.models import mediapipe_modules_dir

    # Model paths in the graph are relative to site-packages, as in mediapipe's own graphs.
    resource_util.set_resource_dir(os.fspath(mediapipe_modules_dir().parent.parent))
    graph = mp.CalculatorGraph(graph_config=config)
    results: dict[str, np.ndarray] = {}
    for name in outputs:
        graph.observe_output_stream(name, lambda stream, packet: results.__setitem__(
            stream, np.asarray(mp.packet_getter.get_float_list(packet), np.float32)))
    graph.start_run()
    frame = mp.packet_creator.create_image_frame(image_format=mp.ImageFormat.SRGB,
                                                 data=np.ascontiguousarray(image_rgb))
    graph.add_packet_to_input_stream("image", frame.at(0))
    graph.close()
    return [results[name] for name in outputs]


def _to_tensor_node(size: int, lo: float, hi: float, keep_aspect: bool, border: str) -> str:
    return f"""
node {{ calculator: "ImageToTensorCalculator" input_stream: "IMAGE:image"
  output_stream: "TENSORS:input_tensors"
  options {{ [mediapipe.ImageToTensorCalculatorOptions.ext] {{
    output_tensor_width: {size} output_tensor_height: {size}
    keep_aspect_ratio: {str(keep_aspect).lower()} border_mode: {border}
    output_tensor_float_range {{ min: {lo} max: {hi} }} }} }} }}
"""


@pytest.fixture(scope="session")
def mp_image_to_tensor() -> MpRun:
    """``f(image_rgb, size, lo, hi, keep_aspect, border)`` -> [(size*size*3,) float32]:
    MediaPipe's CPU ImageToTensorCalculator output for the whole image."""

    def run(image_rgb: np.ndarray, size: int, lo: float, hi: float, keep_aspect: bool = True,
            border: str = "BORDER_ZERO") -> list[np.ndarray]:
        config = ('input_stream: "image"\noutput_stream: "out0"\n'
                  + _to_tensor_node(size, lo, hi, keep_aspect, border)
                  + 'node { calculator: "TensorsToFloatsCalculator" '
                    'input_stream: "TENSORS:input_tensors" output_stream: "FLOATS:out0" }')
        return _graph(config, image_rgb, ["out0"])

    return run


@pytest.fixture(scope="session")
def mp_run_tflite() -> MpRun:
    """``f(model_relpath, image_rgb, lo, hi, n_outputs)`` -> raw output tensors (flattened) of
    MediaPipe's InferenceCalculator (plain TFLite CPU kernels) on an image the size of the
    model input (so ImageToTensor only rescales values: identical input on both sides)."""

    def run(model_relpath: str, image_rgb: np.ndarray, lo: float, hi: float,
            n_outputs: int) -> list[np.ndarray]:
        size = image_rgb.shape[0]
        names = [f"out{i}" for i in range(n_outputs)]
        ranges = " ".join(f"ranges {{ begin: {i} end: {i + 1} }}" for i in range(n_outputs))
        split_out = " ".join(f'output_stream: "t{i}"' for i in range(n_outputs))
        config = "".join(f'output_stream: "{n}"\n' for n in names)
        config = 'input_stream: "image"\n' + config + _to_tensor_node(
            size, lo, hi, False, "BORDER_REPLICATE") + f"""
node {{ calculator: "InferenceCalculator" input_stream: "TENSORS:input_tensors"
  output_stream: "TENSORS:outputs"
  options {{ [mediapipe.InferenceCalculatorOptions.ext] {{
    model_path: "mediapipe/modules/{model_relpath}" delegate {{ tflite {{}} }} }} }} }}
node {{ calculator: "SplitTensorVectorCalculator" input_stream: "outputs" {split_out}
  options {{ [mediapipe.SplitVectorCalculatorOptions.ext] {{ {ranges} }} }} }}
""" + "".join(f'node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:t{i}" '
              f'output_stream: "FLOATS:out{i}" }}\n' for i in range(n_outputs))
        return _graph(config, image_rgb, names)

    return run


@pytest.fixture(scope="session")
def t1_tiles_bgr(t1_bgr: np.ndarray) -> np.ndarray:
    """(15, 400, 400, 3): overlapping tiles (stride 200) of the six-person photo. Its faces are
    too small for the short-range detector on the whole frame (MediaPipe finds none either);
    in tiles each of the six people is found."""
    tiles = [t1_bgr[y:y + 400, x:x + 400] for y in range(0, 401, 200) for x in range(0, 801, 200)]
    return np.ascontiguousarray(np.stack(tiles))


@pytest.fixture(scope="session")
def short_detector():  # type: ignore[no-untyped-def]
    from livecam.gpupipe.networks.models import load_blazeface

    return load_blazeface("short")


@pytest.fixture(scope="session")
def full_detector():  # type: ignore[no-untyped-def]
    from livecam.gpupipe.networks.models import load_blazeface

    return load_blazeface("full")


@pytest.fixture(scope="session")
def face_mesh():  # type: ignore[no-untyped-def]
    from livecam.gpupipe.networks.models import load_face_mesh

    return load_face_mesh()

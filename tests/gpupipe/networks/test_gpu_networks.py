"""Network-level parity: the torch graphs against TFLite run by MediaPipe, same input tensor."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from livecam.analysis.anchors import FULL_RANGE_ANCHORS, SHORT_RANGE_ANCHORS, ssd_anchors
from livecam.core.errors import ModelError
from livecam.gpupipe.networks.models import model_path
from livecam.gpupipe.networks.tflite_reader import read_tflite
from livecam.gpupipe.networks.tflite_torch import TfliteGraphModule

MODELS = [  # (relpath, input size, value range, output shapes)
    ("face_detection/face_detection_short_range.tflite", 128, (-1.0, 1.0),
     [(896, 16), (896, 1)]),
    ("face_detection/face_detection_full_range_sparse.tflite", 192, (-1.0, 1.0),
     [(2304, 16), (2304, 1)]),
    ("face_landmark/face_landmark.tflite", 192, (0.0, 1.0), [(1, 1, 1404), (1, 1, 1)]),
]


def test_reader_rejects_a_file_that_is_not_tflite(tmp_path: Path) -> None:
    bogus = tmp_path / "model.tflite"
    bogus.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelError, match="not a TFLite model"):
        read_tflite(bogus)


def test_reader_densifies_the_sparse_full_range_weights() -> None:
    model = read_tflite(model_path(MODELS[1][0]))
    ops = [op.name for op in model.operators]
    assert ops.count("DENSIFY") == 46
    densified = [model.tensors[op.inputs[0]] for op in model.operators if op.name == "DENSIFY"]
    for tensor in densified:
        assert tensor.data is not None and tensor.data.shape == tensor.shape
        # Sparse conv weights: many exact zeros, but not all.
        assert 0 < np.count_nonzero(tensor.data) < tensor.data.size


def test_anchor_counts_match_the_models() -> None:
    assert ssd_anchors(SHORT_RANGE_ANCHORS).shape == (896, 4)
    full = ssd_anchors(FULL_RANGE_ANCHORS)
    assert full.shape == (2304, 4)
    assert np.allclose(full[:2, :2], [[0.5 / 48, 0.5 / 48], [1.5 / 48, 0.5 / 48]])


@pytest.mark.parametrize(("relpath", "size", "value_range", "shapes"), MODELS,
                         ids=["short_range", "full_range_sparse", "face_landmark"])
def test_network_outputs_match_tflite(relpath: str, size: int, value_range: tuple[float, float],
                                      shapes: list[tuple[int, ...]], astronaut_bgr: np.ndarray,
                                      mp_run_tflite) -> None:  # type: ignore[no-untyped-def]
    # A real face filling the input, as the detector and the mesh see it.
    face_rgb = cv2.resize(astronaut_bgr[30:330, 100:400, ::-1], (size, size),
                          interpolation=cv2.INTER_AREA)
    lo, hi = value_range
    reference = mp_run_tflite(relpath, face_rgb, lo, hi, len(shapes))
    net = TfliteGraphModule(read_tflite(model_path(relpath))).eval()
    x = torch.from_numpy(face_rgb.astype(np.float32) * np.float32((hi - lo) / 255.0)
                         + np.float32(lo)).permute(2, 0, 1)[None]
    with torch.no_grad():
        outputs = net(x.repeat(3, 1, 1, 1))  # batched: every row must equal the reference
    for out, ref, shape in zip(outputs, reference, shapes, strict=True):
        assert tuple(out.shape) == (3, *shape)
        scale = float(np.abs(ref).max())
        for row in out:
            err = float(np.abs(row.numpy().reshape(-1) - ref).max())
            assert err <= 2e-6 * scale + 1e-4, f"{relpath}: max error {err} (outputs up to {scale})"


def test_reader_parses_a_file_once_until_it_changes(tmp_path: Path) -> None:
    # every stream of a process loads the same files: one parse, shared, read-only
    copy = tmp_path / "detector.tflite"
    copy.write_bytes(model_path(MODELS[0][0]).read_bytes())
    first = read_tflite(copy)
    assert read_tflite(str(copy)) is first
    assert all(t.data is None or not t.data.flags.writeable for t in first.tensors)
    later = copy.stat().st_mtime_ns + 10**9
    os.utime(copy, ns=(later, later))
    assert read_tflite(copy) is not first
    # a daemon whose model files change keeps one parse per file, not one per version
    from livecam.gpupipe.networks import tflite_reader

    assert [k for k in tflite_reader._CACHE if k[0] == str(copy.resolve())] == [
        (str(copy.resolve()), copy.stat().st_size, later)]


def test_modules_from_one_parsed_model_own_their_weights() -> None:
    model = read_tflite(model_path(MODELS[0][0]))
    a, b = TfliteGraphModule(model), TfliteGraphModule(model)
    name, weight = next(iter(a.named_buffers()))
    before = dict(b.named_buffers())[name].clone()
    weight.add_(1.0)  # as a later in-place conversion of one stream's module would
    assert torch.equal(dict(b.named_buffers())[name], before)


def test_zero_pads_before_a_convolution_are_the_convolution_s_own() -> None:
    # the full-range detector's 43 PAD ops each wrote a zero-filled copy of the activation (two
    # kernels a PAD, at every call); the convolution reading it pads by itself now. The
    # outputs stay TFLite's (test_network_outputs_match_tflite).
    net = TfliteGraphModule(read_tflite(model_path(MODELS[1][0])))
    assert [s.kind for s in net.steps].count("pad") == 0
    folded = [s for s in net.steps if s.kind == "conv" and s.params["padding"] == (1, 1)]
    assert len(folded) == 43
    # a PAD that is not symmetric, or on channels, stays a step (the mesh's channel pads)
    mesh = TfliteGraphModule(read_tflite(model_path(MODELS[2][0])))
    assert [s.params["pad"][4:] for s in mesh.steps if s.kind == "pad"] == [
        (0, 16), (0, 32), (0, 64)]

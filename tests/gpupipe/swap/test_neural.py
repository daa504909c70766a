"""The tensor neural swap equals the CPU neural swap (insightface's pre/post-processing) on a
real photo with six faces, given the same keypoints. The generator is a small stand-in ONNX
built here (the real inswapper is a download); the CPU path runs it with onnxruntime, ours with
the torch engine, as on a GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.engines.torch_engine import TorchEngine
from livecam.gpupipe.swap.neural import GpuInswapper, latents_from_embeddings
from livecam.swap.inswapper import InswapperModel, read_emap
from livecam.swap.inswapper import latents_from_embeddings as cpu_latents
from tests.helpers.standins import build_inswapper


@pytest.fixture(scope="module")
def inswapper_dyn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_inswapper(tmp_path_factory.mktemp("gpu_swap") / "inswapper.onnx", batch="N")


def test_latents_equal_cpu(inswapper_dyn: Path) -> None:
    emap = read_emap(inswapper_dyn)
    emb = np.random.default_rng(0).standard_normal((3, 512)).astype(np.float32) * 7
    got = latents_from_embeddings(torch.from_numpy(emb), torch.from_numpy(emap)).numpy()
    np.testing.assert_allclose(got, cpu_latents(emb, emap), atol=1e-5)


@pytest.mark.slow
def test_gpu_swap_equals_cpu_swap_on_six_faces(t1_faces, inswapper_dyn: Path) -> None:  # type: ignore[no-untyped-def]
    image = t1_faces.image_bgr
    n = len(t1_faces.five_xy)
    emb = np.random.default_rng(1).standard_normal((n, 512)).astype(np.float32)
    cpu = InswapperModel(OnnxRuntimeEngine(inswapper_dyn, device="cpu"), inswapper_dyn)
    cpu.open()
    latents = cpu.latents(emb)
    ref = cpu.swap(image, t1_faces.five_xy, latents)
    engine = TorchEngine(inswapper_dyn, device="cpu", precision="fp32", cuda_graphs=False)
    engine.open()
    swapper = GpuInswapper(engine, window_px=256)
    swapper.open("cpu")
    frames = torch.from_numpy(image.copy())[None]
    with torch.inference_mode():
        swapper.swap_(frames, torch.zeros(n, dtype=torch.long),
                      torch.from_numpy(t1_faces.five_xy), torch.from_numpy(latents),
                      torch.ones(n, dtype=torch.bool))
    got = frames[0].numpy()
    diff = np.abs(got.astype(int) - ref.astype(int))
    assert (ref != image).any(axis=-1).mean() > 0.02  # six faces were really swapped
    assert diff.mean() < 0.1
    assert (diff > 3).mean() < 2e-3


def test_colour_match_moves_face_towards_target_light(astronaut_bgr: np.ndarray,
                                                      inswapper_dyn: Path) -> None:
    engine = TorchEngine(inswapper_dyn, device="cpu", precision="fp32", cuda_graphs=False)
    engine.open()
    swapper = GpuInswapper(engine, colour_blur_px=15.0)
    crops = torch.from_numpy(astronaut_bgr[100:228, 180:308].copy()).float()[None]
    dark = torch.full_like(crops, 60.0)
    matched = swapper.colour_match(dark, crops)
    # a flat dark face takes on the target's brightness
    assert abs(float(matched.mean()) - float(crops.mean())) < 0.1 * float(crops.mean())
    assert float((matched - dark).abs().mean()) > 20.0

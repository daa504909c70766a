"""The enhancer and pixel boost on tensors against their CPU twins (real faces; run on the CPU
here, the same code on CUDA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.engines.torch_engine import TorchEngine
from livecam.gpupipe.swap import boost as gpu_boost
from livecam.gpupipe.swap.enhance import (
    GpuFaceEnhancer,
    enhancer_faces,
    enhancer_input,
    restore_paste_,
)
from livecam.swap import boost
from livecam.swap.align import align_matrix
from livecam.swap.enhance import (
    FaceEnhancer,
    crops_to_input,
    output_to_bgr,
    paste_restored,
    warp_enhancer_crop,
)
from tests.helpers.standins import build_enhancer


def test_tiles_equal_cpu() -> None:
    crops = np.random.default_rng(0).integers(0, 256, (2, 512, 512, 3), dtype=np.uint8)
    for k in (2, 4):
        tiles = gpu_boost.split_tiles(torch.from_numpy(crops), k)
        np.testing.assert_array_equal(tiles.numpy(), boost.split_tiles(crops, k))
        np.testing.assert_array_equal(gpu_boost.merge_tiles(tiles, k).numpy(), crops)
    latents = torch.arange(6.0).reshape(2, 3)
    assert gpu_boost.repeat_latents(latents, 2)[:5, 0].tolist() == [0, 0, 0, 0, 3]


def test_conversions_equal_cpu(t1_faces) -> None:  # type: ignore[no-untyped-def]
    crop = warp_enhancer_crop(t1_faces.image_bgr,
                              align_matrix(t1_faces.five_xy[0], 512, "ffhq_512"), 512)
    ours = enhancer_input(torch.from_numpy(crop[None]).float()).numpy()
    np.testing.assert_allclose(ours, crops_to_input(crop[None]), rtol=0, atol=1e-6)
    pred = np.random.default_rng(1).uniform(-1.3, 1.3, (2, 3, 64, 64)).astype(np.float32)
    np.testing.assert_array_equal(enhancer_faces(torch.from_numpy(pred)).numpy().astype(np.uint8),
                                  output_to_bgr(pred))


@pytest.fixture(scope="module")
def gfpgan_standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_enhancer(tmp_path_factory.mktemp("gpu_enh") / "gfpgan.onnx", size_px=512)


def _frames(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image))[None].clone()


def test_crops_and_paste_equal_cpu(t1_faces) -> None:  # type: ignore[no-untyped-def]
    image, five = t1_faces.image_bgr, t1_faces.five_xy
    n = len(five)

    enhancer = GpuFaceEnhancer(None, size_px=512, template="ffhq_512", blend=0.8,
                               window_px=512)
    enhancer.place("cpu")  # what crops() needs, without an engine
    frames = _frames(image)
    index = torch.zeros(n, dtype=torch.long)
    matrices, crops = enhancer.crops(frames, index, torch.from_numpy(five))
    cpu_crops = np.stack([warp_enhancer_crop(image, align_matrix(k, 512, "ffhq_512"), 512)
                          for k in five])
    diff = np.abs(crops.numpy() - cpu_crops)
    assert (diff <= 1).mean() > 0.999 and diff.mean() < 0.01
    # paste-back of one restored face (any picture will do: the CPU's own crop, brightened)
    restored = np.clip(cpu_crops.astype(int) + 40, 0, 255).astype(np.uint8)
    worst = []
    for i in range(n):
        gpu_frames = _frames(image)
        restore_paste_(gpu_frames, index[i:i + 1], torch.from_numpy(restored[i:i + 1]).float(),
                       matrices[i:i + 1], torch.ones(1, dtype=torch.bool), blend=0.8,
                       window_px=512)
        cpu = paste_restored(image, restored[i], matrices[i].double().numpy(), blend=0.8)
        d = np.abs(gpu_frames[0].numpy().astype(int) - cpu.astype(int))
        changed = (cpu != image).any(axis=-1).sum()
        assert changed > 3000
        worst.append((float(d.mean()), float((d > 3).mean())))
    print("per face (mean abs, share > 3 levels):", [(round(a, 4), round(b, 5)) for a, b in worst])
    assert max(a for a, _ in worst) < 0.05
    assert max(b for _, b in worst) < 0.001


def test_enhance_equals_cpu_enhancer(t1_faces, gfpgan_standin: Path) -> None:  # type: ignore[no-untyped-def]
    image, five = t1_faces.image_bgr, t1_faces.five_xy
    cpu = FaceEnhancer(OnnxRuntimeEngine(gfpgan_standin, device="cpu"), blend=1.0)
    cpu.open()
    expected = cpu.enhance(image, five)
    engine = TorchEngine(gfpgan_standin, device="cpu", precision="fp32", cuda_graphs=False)
    engine.open()
    gpu = GpuFaceEnhancer(engine, blend=1.0, window_px=512)
    gpu.open("cpu")
    frames = _frames(image)
    n = len(five)
    gpu.enhance_(frames, torch.zeros(n, dtype=torch.long), torch.from_numpy(five),
                 torch.ones(n, dtype=torch.bool))
    d = np.abs(frames[0].numpy().astype(int) - expected.astype(int))
    print(f"GPU enhancer vs CPU, {n} faces: mean {d.mean():.4f}, > 3 levels {(d > 3).mean():.5f}")
    assert (expected != image).any(axis=-1).sum() > 5000 * n
    assert d.mean() < 0.1 and (d > 3).mean() < 0.002


def test_boosted_gpu_swap_equals_cpu(astronaut_faces, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from livecam.gpupipe.swap.neural import GpuInswapper
    from livecam.swap.inswapper import InswapperModel
    from tests.helpers.standins import build_inswapper

    path = build_inswapper(tmp_path / "inswapper.onnx", batch="N")
    image, five = astronaut_faces.image_bgr, astronaut_faces.five_xy
    cpu = InswapperModel(OnnxRuntimeEngine(path, device="cpu"), path, pixel_boost_px=256)
    cpu.open()
    latents = cpu.latents(np.random.default_rng(2).standard_normal((1, 512)))
    expected = cpu.swap(image, five, latents)
    engine = TorchEngine(path, device="cpu", precision="fp32", cuda_graphs=False)
    engine.open()
    swapper = GpuInswapper(engine, window_px=512, pixel_boost_px=256)
    swapper.open("cpu")
    frames = _frames(image)
    with torch.inference_mode():
        swapper.swap_(frames, torch.zeros(1, dtype=torch.long), torch.from_numpy(five),
                      torch.from_numpy(latents), torch.ones(1, dtype=torch.bool))
    d = np.abs(frames[0].numpy().astype(int) - expected.astype(int))
    print(f"boosted GPU swap vs CPU: mean {d.mean():.4f}, > 3 levels {(d > 3).mean():.5f}")
    assert (expected != image).any(axis=-1).sum() > 5000
    assert d.mean() < 0.1 and (d > 3).mean() < 2e-3


def test_the_enhancer_window_follows_the_swaps_paste_window() -> None:
    """A face the swap pasted in its large window (close to the camera) is restored in the
    enhancer's window for that size, not left unrestored as the usual window would leave it."""
    import functools

    from livecam.gpupipe.swap.enhance import enhancer_window_px
    from livecam.swap.align import template_xy

    window_for = functools.partial(enhancer_window_px, crop_px=128, template="arcface_128",
                                   size_px=512, enhancer_template="ffhq_512")
    enhancer = GpuFaceEnhancer(None, size_px=512, template="ffhq_512",
                               window_px=window_for(640), window_for=window_for)
    enhancer.place("cpu")
    assert enhancer.window() == enhancer.window(640) == window_for(640) == 800
    assert enhancer.window(1088) == window_for(1088) > 1088
    # the keypoints of a face filling the swap's 128 px crop, 7 times larger: too big for
    # the usual 800 px restorer window, held by the one after a 1088 px swap window
    big = torch.from_numpy(template_xy("arcface_128", 128) * 7.0 + 100.0)[None]
    assert not bool(enhancer.fits(big)[0])
    assert bool(enhancer.fits(big, 1088)[0])
    plain = GpuFaceEnhancer(None, size_px=512, template="ffhq_512", window_px=800)
    plain.place("cpu")
    assert plain.window(1088) == 800  # without window_for: always its own window

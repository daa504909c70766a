"""Fixtures for the GPU pipeline tests: real MediaPipe weights, a stand-in generator and frames
with a real face. The tests run the pipeline on the CPU (the same code as on CUDA: no streams,
no pinned memory, no graphs); CUDA-only checks are marked ``gpu``.

On a GPU machine without mediapipe/scikit-image, point ``LIVECAM_MEDIAPIPE_MODULES`` and
``LIVECAM_TEST_PHOTOS`` at what ``scripts/export_bench_assets.py`` wrote.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from livecam.gpupipe.build import ProgramOptions, build_program, detect_rois
from livecam.gpupipe.program import FrameProgram
from livecam.testing.standins import build_inswapper

HEIGHT, WIDTH = 360, 480


@dataclass(frozen=True)
class FaceFrame:
    frame_bgr: np.ndarray  # (H, W, 3)
    rois: np.ndarray  # (1, 4) from the detector
    latents: np.ndarray  # (4, 512)


@pytest.fixture(scope="session")
def inswapper_dyn_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_inswapper(tmp_path_factory.mktemp("pipeline_gpu") / "inswapper.onnx",
                           batch="N")


@pytest.fixture(scope="session")
def cpu_engine(inswapper_dyn_path: Path) -> Any:
    from livecam.engines.torch_engine import TorchEngine

    engine = TorchEngine(inswapper_dyn_path, device="cpu", precision="fp32", cuda_graphs=False)
    engine.open()
    return engine


def make_program(engine: Any, max_faces: int, device: str = "cpu") -> FrameProgram:
    precision = "fp16" if device == "cuda" else "fp32"
    return build_program(engine, device=device, max_faces=max_faces,
                         models_dir=os.environ.get("LIVECAM_MEDIAPIPE_MODULES"),
                         options=ProgramOptions(precision=precision, window_px=320))


@pytest.fixture(scope="session")
def astronaut_bgr() -> np.ndarray:
    """skimage's astronaut, or ``$LIVECAM_TEST_PHOTOS/astronaut.png`` where scikit-image is
    not installed (the GPU machine)."""
    folder = os.environ.get("LIVECAM_TEST_PHOTOS")
    if folder:
        image = cv2.imread(os.path.join(folder, "astronaut.png"), cv2.IMREAD_COLOR)
        assert image is not None, f"no astronaut.png in {folder}"
        return image
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])


@pytest.fixture(scope="session")
def face_frame(astronaut_bgr: np.ndarray, cpu_engine: Any) -> FaceFrame:
    """The astronaut on a grey background, her detector ROI, and unit latents."""
    frame = np.full((HEIGHT, WIDTH, 3), 120, np.uint8)
    frame[:, 60:420] = cv2.resize(astronaut_bgr, (360, 360), interpolation=cv2.INTER_AREA)
    program = make_program(cpu_engine, 1)
    rois, index = detect_rois(program, torch.from_numpy(frame)[None], per_frame=1)
    assert len(rois) == 1 and index[0] == 0
    rng = np.random.default_rng(5)
    latents = rng.standard_normal((4, 512)).astype(np.float32)
    latents /= np.linalg.norm(latents, axis=1, keepdims=True)
    return FaceFrame(frame, rois, latents)


def fill_with(frames_bgr: np.ndarray, rois: np.ndarray, latents: np.ndarray,
              frame_index: np.ndarray, override: bool) -> Any:
    """A scheduler fill callback writing these inputs."""
    n = len(rois)

    def fill(slot: Any) -> None:
        slot.frames_in_host.numpy()[:] = frames_bgr
        fh = slot.faces_host
        fh.frame_index[:n] = torch.from_numpy(frame_index)
        fh.roi[:n] = torch.from_numpy(rois)
        fh.roi_override[:n] = override
        fh.latents[:n] = torch.from_numpy(latents[:n])
        fh.valid[:n] = True

    return fill

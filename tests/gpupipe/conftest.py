"""Fixtures for the GPU swap tests: a stand-in generator and frames with real faces with their
MediaPipe landmarks. The tests run the GPU swap on the CPU (the same code as on CUDA: no
streams, no pinned memory, no graphs); CUDA-only checks are marked ``gpu``.

On a GPU machine without mediapipe/scikit-image, point ``LIVECAM_MEDIAPIPE_MODULES`` and
``LIVECAM_TEST_PHOTOS`` at what ``scripts/device/export_bench_assets.py`` wrote; the landmarks then
come from the torch port of the face mesh on the detector's region (the same model).
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

from livecam.gpupipe.build import build_program
from livecam.gpupipe.program import SwapProgram
from tests.helpers.standins import build_inswapper

HEIGHT, WIDTH = 360, 480


def assert_same_swap(got: np.ndarray, expected: np.ndarray) -> None:
    """The same frame swapped the same way, through a generator call of another batch size:
    torch's CPU convolutions pick kernels by batch size, so some values may round a level
    apart (seen on a 2-core Xeon: 1 in 518,400 values, and 0.08 % of them for a mirrored face,
    each by one level); another stream's frame, a face missing or swapped with another latent
    differs by tens of levels."""
    assert got.shape == expected.shape
    diff = np.abs(got.astype(np.int16) - expected.astype(np.int16))
    assert diff.max() <= 2 and (diff > 0).mean() < 5e-3, (diff.max(), (diff > 0).mean())


@dataclass(frozen=True)
class FaceFrame:
    frame_bgr: np.ndarray  # (H, W, 3)
    landmarks_xy: np.ndarray  # (1, 468, 2) px
    latents: np.ndarray  # (4, 512)

    @property
    def kps(self) -> np.ndarray:
        from livecam.analysis.landmarks import five_point

        return five_point(self.landmarks_xy)


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


def make_program(engine: Any, device: str = "cpu") -> SwapProgram:
    return build_program(engine, device=device, window_px=320)


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


def mesh_of(frame_bgr: np.ndarray) -> np.ndarray:
    """(N, 468, 2) landmarks of the faces in ``frame_bgr``: MediaPipe's (analyze_photo), or
    where mediapipe is not installed the torch port of the same face mesh on the torch
    BlazeFace's regions."""
    import importlib.util

    if importlib.util.find_spec("mediapipe") is not None:
        from livecam.analysis.photo import analyze_photo

        return analyze_photo(frame_bgr).landmarks_xy[:, :468]
    from livecam.gpupipe.networks.facemesh import rois_from_detections
    from livecam.gpupipe.networks.models import load_blazeface, load_face_mesh

    models = os.environ.get("LIVECAM_MEDIAPIPE_MODULES")
    detector = load_blazeface("full", models_dir=models)
    mesh = load_face_mesh(models_dir=models)
    with torch.inference_mode():
        frames = torch.from_numpy(frame_bgr)[None]
        det = detector(frames)
        keep = det.valid[0]
        rois = rois_from_detections(det.boxes_xyxy_px[0][keep], det.keypoints_xy_px[0][keep])
        out = mesh(frames, torch.zeros(int(keep.sum()), dtype=torch.long), rois)
    return out.landmarks_px[..., :2].numpy()


@pytest.fixture(scope="session")
def face_frame(astronaut_bgr: np.ndarray) -> FaceFrame:
    """The astronaut on a grey background, her landmarks, and unit latents."""
    frame = np.full((HEIGHT, WIDTH, 3), 120, np.uint8)
    frame[:, 60:420] = cv2.resize(astronaut_bgr, (360, 360), interpolation=cv2.INTER_AREA)
    landmarks = mesh_of(frame)
    assert len(landmarks) == 1
    rng = np.random.default_rng(5)
    latents = rng.standard_normal((4, 512)).astype(np.float32)
    latents /= np.linalg.norm(latents, axis=1, keepdims=True)
    return FaceFrame(frame, landmarks.astype(np.float32), latents)

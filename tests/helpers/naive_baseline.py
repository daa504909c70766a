"""The naive GPU baseline the benchmark (``scripts/bench_gpu_product.py``) compares against:
eager fp32, synchronous, one face at a time. Lab code, so it lives here and not in the wheel.

It does the per-frame work of ``livecam run`` on the GPU (find the faces, their face mesh, the
swap) with the same networks and the same swap maths, the way a simple port would: a blocking
upload from pageable memory, BlazeFace on the whole frame, the face mesh on each detection's
region, then per face the alignment, one generator call and the paste-back with a host sync
after each step, and a blocking download. No streams, no pinned memory, no graphs, no
batching, no tracking (every frame is detected). Build it from fp32 modules and an fp32 engine
opened with ``cuda_graphs=False, channels_last=False``. One thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from livecam.gpupipe.networks.facemesh import rois_from_detections
from livecam.gpupipe.swap.align import FivePointFromMesh
from livecam.gpupipe.swap.neural import GpuInswapper


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class NaiveBaseline:
    """``process`` one frame: (H, W, 3) uint8 BGR and one latent (512,) per face in, the
    swapped frame out (a host array). ``detector``/``landmarker``: the torch BlazeFace and
    face mesh (fp32) on ``swapper``'s device; ``swapper``: an open :class:`GpuInswapper` on an
    eager fp32 engine."""

    def __init__(self, *, detector: Any, landmarker: Any, swapper: GpuInswapper,
                 device: torch.device | str, presence_threshold: float) -> None:
        self.detector = detector
        self.landmarker = landmarker
        self.swapper = swapper
        self.device = torch.device(device)
        self.presence_threshold = presence_threshold
        self.five_point = FivePointFromMesh().to(self.device)

    def process(self, frame_bgr: np.ndarray, latents: np.ndarray) -> tuple[np.ndarray, int]:
        """The swapped frame and how many faces were swapped (at most ``len(latents)``)."""
        sw, dev = self.swapper, self.device
        with torch.inference_mode():
            frames = torch.from_numpy(frame_bgr).to(dev)[None]  # blocking, pageable
            det = self.detector(frames)
            valid = det.valid[0].cpu().numpy()  # the host reads detections before going on
            rois = rois_from_detections(det.boxes_xyxy_px.float(), det.keypoints_xy_px.float())
            swapped = frames.clone()
            zero = torch.zeros(1, dtype=torch.long, device=dev)
            done = 0
            for j in np.flatnonzero(valid)[:len(latents)]:
                roi = type(rois)(rois.center_xy_px[0, j:j + 1], rois.size_px[0, j:j + 1],
                                 rois.rotation_rad[0, j:j + 1])
                mesh = self.landmarker(frames, zero, roi)
                if float(mesh.presence[0]) < self.presence_threshold:  # host sync per face
                    continue
                five = self.five_point(mesh.landmarks_px)
                matrices, crops = sw.crops(frames, zero, five)
                latent = torch.from_numpy(latents[done:done + 1]).to(dev)
                faces = sw.colour_match(sw.generate(sw.blob(crops), latent), crops)
                _sync(dev)
                sw.paste_(swapped, zero, faces, matrices, torch.ones(1, dtype=torch.bool,
                                                                      device=dev))
                _sync(dev)
                done += 1
            return swapped[0].cpu().numpy(), done  # blocking download

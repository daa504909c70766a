"""The naive GPU baseline the benchmark compares against: eager fp32, synchronous, one face at
a time.

It runs the same networks and the same swap maths as :class:`FrameProgram`, the way a simple
port would: a blocking upload from pageable memory, every module eagerly in float32, one
generator call per face with a host sync after each, a blocking download. No streams, no
pinned memory, no graphs, no batching. Build it with fp32 modules and an fp32 engine opened
with ``cuda_graphs=False, channels_last=False``. One thread.
"""

from __future__ import annotations

import numpy as np
import torch

from livecam.analysis.gpu.facemesh import FaceRois, rois_from_landmarks
from livecam.gpupipe.program import PRESENCE_THRESHOLD, FrameProgram


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class NaiveBaseline:
    """``process`` one frame: (H, W, 3) uint8 BGR, ROIs (n, 4) and latents (n, 512) in;
    the swapped frame and the next ROIs out (host arrays)."""

    def __init__(self, program: FrameProgram) -> None:
        self.program = program
        self.device = program.roi_state.device

    def process(self, frame_bgr: np.ndarray, rois: np.ndarray, latents: np.ndarray, *,
                detect: bool = True) -> tuple[np.ndarray, np.ndarray]:
        prog, sw, dev = self.program, self.program.swapper, self.device
        with torch.inference_mode():
            frames = torch.from_numpy(frame_bgr).to(dev)[None]  # blocking, pageable
            if detect and prog.detector is not None:
                det = prog.detector(frames)
                det.valid.cpu()  # the host reads detections before going on
            swapped = frames.clone()
            next_rois = np.zeros_like(rois)
            zero = torch.zeros(1, dtype=torch.long, device=dev)
            for i in range(len(rois)):
                roi = torch.from_numpy(rois[i:i + 1]).to(dev)
                mesh = prog.landmarker(frames, zero, FaceRois(roi[:, 0:2], roi[:, 2], roi[:, 3]))
                present = float(mesh.presence[0]) >= PRESENCE_THRESHOLD  # host sync per face
                follow = rois_from_landmarks(mesh.landmarks_px)
                next_rois[i] = torch.cat((follow.center_xy_px[0], follow.size_px,
                                          follow.rotation_rad)).cpu().numpy()
                five = prog.five_point(mesh.landmarks_px)
                matrices, crops = sw.crops(frames, zero, five)
                latent = torch.from_numpy(latents[i:i + 1]).to(dev)
                faces = sw.colour_match(sw.generate(sw.blob(crops), latent), crops)
                _sync(dev)
                valid = torch.tensor([present], device=dev)
                sw.paste_(swapped, zero, faces, matrices, valid)
                _sync(dev)
            return swapped[0].cpu().numpy(), next_rois  # blocking download

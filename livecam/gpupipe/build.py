"""Build the GPU pipeline from model files: analysis networks, swap, program, scheduler.

:func:`build_program` loads MediaPipe's BlazeFace and face mesh from their ``.tflite`` files
(``models_dir``: a copy of ``mediapipe/modules``, or None for the installed mediapipe), puts
them on ``device`` in ``precision``, wraps an already-open torch-side generator engine in a
:class:`~livecam.swap.gpu.neural.GpuInswapper` and returns the :class:`FrameProgram`.
:func:`rois_for_frames` turns first detections into ROI rows for the host to override with.
Call from the thread that will own the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from livecam.gpupipe.program import FrameProgram
from livecam.swap.gpu.neural import GpuInswapper

if TYPE_CHECKING:  # livecam.config imports yaml, which the GPU machine may not have
    from livecam.config.gpu import GpuConfig


@dataclass(frozen=True)
class ProgramOptions:
    """Knobs of the frame program.

    ``precision``: ``fp16`` or ``fp32`` for the analysis networks (the generator's precision
    is its engine's). ``detector_range``: BlazeFace ``short`` (128 px input, faces within ~2 m)
    or ``full`` (192 px). ``detect``: run the detector every tick (off: the host brings ROIs).
    ``window_px``: paste-back window side (must exceed the largest face's crop footprint).
    ``colour_blur_px``: > 0 adds a low-frequency colour match on the 128 px crop.
    """

    precision: str = "fp16"
    detector_range: str = "short"
    detect: bool = True
    max_detections: int = 8
    window_px: int = 640
    colour_blur_px: float = 0.0

    @classmethod
    def from_config(cls, gpu: GpuConfig) -> ProgramOptions:
        """The options of the ``gpu`` config section."""
        return cls(precision=gpu.precision, detector_range=gpu.detector_range,
                   window_px=gpu.paste_window_px, colour_blur_px=gpu.colour_blur_px)


def build_program(engine: Any, *, device: torch.device | str, max_faces: int,
                  models_dir: str | Path | None = None,
                  options: ProgramOptions = ProgramOptions()) -> FrameProgram:
    """The frame program on ``device`` with a ROI state for ``max_faces`` face slots.

    ``engine`` is open, lives on ``device`` and offers ``run_torch`` (``TorchEngine``). With
    ``cuda_graphs=True`` the engine replays its own graph between the pipeline's two graphs
    (see :mod:`livecam.gpupipe.graphs`).
    """
    from livecam.analysis.gpu.models import load_blazeface, load_face_mesh

    device = torch.device(device)
    dtype = torch.float16 if options.precision == "fp16" else torch.float32
    landmarker = load_face_mesh(models_dir=models_dir).to(device, dtype)
    detector = None
    if options.detect:
        detector = load_blazeface(options.detector_range, models_dir=models_dir,
                                  max_faces=options.max_detections).to(device, dtype)
    swapper = GpuInswapper(engine, window_px=options.window_px,
                           colour_blur_px=options.colour_blur_px)
    swapper.open(device)
    roi_state = torch.zeros((max_faces, 4), dtype=torch.float32, device=device)
    return FrameProgram(landmarker=landmarker, swapper=swapper, detector=detector,
                        roi_state=roi_state)


def detect_rois(program: FrameProgram, frames_bhwc_u8: torch.Tensor, *, per_frame: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """First ROIs from a detector pass: (F, 4) float32 rows (cx, cy, size, rotation) and (F,)
    int64 frame indices for the ``per_frame`` best detections of each frame (eagerly, once;
    used to start tracking). Frames without enough faces give fewer rows."""
    from livecam.analysis.gpu.facemesh import rois_from_detections

    if program.detector is None:
        raise ValueError("the program has no detector (ProgramOptions.detect is False)")
    with torch.inference_mode():
        det = program.detector(frames_bhwc_u8)
        rois = rois_from_detections(det.boxes_xyxy_px.float(), det.keypoints_xy_px.float())
    valid = det.valid.cpu().numpy()
    centre = rois.center_xy_px.cpu().numpy()
    size = rois.size_px.cpu().numpy()
    rot = rois.rotation_rad.cpu().numpy()
    rows, index = [], []
    for b in range(valid.shape[0]):
        for j in np.flatnonzero(valid[b])[:per_frame]:
            rows.append([centre[b, j, 0], centre[b, j, 1], size[b, j], rot[b, j]])
            index.append(b)
    return (np.asarray(rows, np.float32).reshape(-1, 4), np.asarray(index, np.int64))

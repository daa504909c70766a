"""The per-tick GPU work: detect, landmarks, align, generate, colour, paste, all on the device.

:class:`FrameProgram` runs on one :class:`~livecam.gpupipe.slots.Slot`'s device buffers
for a static number of face slots (a *bucket*), so it can be captured in CUDA graphs per
(slot, bucket, detection flag). Its parts:

- :meth:`FrameProgram.analyse`: BlazeFace on every frame of ticks that ask for it (every few
  ticks, as the CPU analysis stage does; detections feed the host tracker), the face mesh on
  each face slot's ROI, and the next tick's ROI from the new landmarks (MediaPipe's tracking
  mode). ROIs chain from tick to tick on the device (``roi_state``); the
  host overrides a row (``roi_override``) when its tracker starts a new face.
- :meth:`FrameProgram.stage` (analysis, then 5 points from the mesh, alignment, crops),
  :meth:`FrameProgram.generate` (one batched generator call for every face of every frame) and
  :meth:`FrameProgram.finish` (optional colour match, insightface paste-back in place). The
  generator call sits between two capturable halves so an engine that runs its own CUDA graph
  (or no graph) can be used between two pipeline graphs.

Only small arrays (landmarks, detections) go back to the host besides the frames. The caller
makes the slot's stream current; nothing here synchronises with the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from livecam.analysis.gpu.facemesh import FaceRois, rois_from_landmarks
from livecam.gpupipe.slots import Slot
from livecam.swap.gpu.align import FivePointFromMesh
from livecam.swap.gpu.neural import GpuInswapper
from livecam.swap.gpu.paste import mask_fits_window

# MediaPipe's default min_tracking_confidence: below it the mesh has lost the face.
PRESENCE_THRESHOLD = 0.5

Marker = Callable[[str], None]


class Staged(NamedTuple):
    """What the generator and the paste-back need for N faces: ``frame_index`` (N,),
    ``matrices`` (N, 2, 3) frame -> crop, ``crops`` (N, s, s, 3) BGR, ``blob`` (N, 3, s, s)
    network input, ``latents`` (N, 512), ``valid`` (N,) bool."""

    frame_index: torch.Tensor
    matrices: torch.Tensor
    crops: torch.Tensor
    blob: torch.Tensor
    latents: torch.Tensor
    valid: torch.Tensor


def _no_mark(_: str) -> None:
    return None


class FrameProgram:
    """The frame work on device tensors (see the module docstring).

    ``landmarker``: :class:`livecam.analysis.gpu.facemesh.FaceMeshLandmarker` on the device;
    ``detector``: :class:`livecam.analysis.gpu.blazeface.BlazeFaceDetector` or None (detection
    done elsewhere); ``swapper``: an open :class:`GpuInswapper`. ``roi_state`` (max_faces, 4)
    float32 on the device is shared by every slot: tick k+1 reads what tick k wrote, so the
    scheduler orders the slots' compute.
    """

    def __init__(self, *, landmarker: Any, swapper: GpuInswapper, detector: Any = None,
                 roi_state: torch.Tensor) -> None:
        self.landmarker = landmarker
        self.detector = detector
        self.swapper = swapper
        self.roi_state = roi_state
        self.five_point = FivePointFromMesh().to(roi_state.device)

    def analyse(self, slot: Slot, n_faces: int, mark: Marker = _no_mark, *,
                detect: bool = True) -> None:
        """Detections for every frame (when ``detect``; the detection outputs keep their last
        values otherwise) and landmarks for the first ``n_faces`` face slots."""
        if detect:
            self.detect(slot, mark)
        self.landmarks(slot, n_faces, mark)

    def detect(self, slot: Slot, mark: Marker = _no_mark) -> None:
        """BlazeFace on every frame of the slot into ``faces_dev.det_*``. Reads only the
        frames, so the scheduler may run it on a side stream beside :meth:`landmarks`."""
        if self.detector is None:
            return
        fd = slot.faces_dev
        det = self.detector(slot.frames_dev)
        d = min(fd.det_boxes.shape[1], det.boxes_xyxy_px.shape[1])
        fd.det_boxes[:, :d].copy_(det.boxes_xyxy_px[:, :d])
        fd.det_scores[:, :d].copy_(det.scores[:, :d])
        fd.det_valid[:, :d].copy_(det.valid[:, :d])
        mark("detect")

    def landmarks(self, slot: Slot, n_faces: int, mark: Marker = _no_mark) -> None:
        """The face mesh on the first ``n_faces`` face slots' ROIs and the next ROIs (reads
        and writes ``roi_state``: ticks must run this in order)."""
        if n_faces == 0:
            return
        frames = slot.frames_dev
        fd = slot.faces_dev
        n = n_faces
        roi = torch.where(fd.roi_override[:n, None], fd.roi[:n], self.roi_state[:n])
        rois = FaceRois(roi[:, 0:2], roi[:, 2], roi[:, 3])
        mesh = self.landmarker(frames, fd.frame_index[:n], rois)
        fd.landmarks[:n].copy_(mesh.landmarks_px)
        fd.presence[:n].copy_(mesh.presence)
        following = rois_from_landmarks(mesh.landmarks_px)
        roi_next = torch.cat((following.center_xy_px, following.size_px[:, None],
                              following.rotation_rad[:, None]), dim=1)
        # a lost face keeps its last ROI, so a brief miss does not send it to (0, 0)
        lost = (mesh.presence < PRESENCE_THRESHOLD)[:, None]
        roi_next = torch.where(lost, roi, roi_next)
        fd.roi_next[:n].copy_(roi_next)
        self.roi_state[:n].copy_(roi_next)
        mark("landmarks")

    def stage(self, slot: Slot, n_faces: int, mark: Marker = _no_mark, *,
              detect: bool = True) -> Staged | None:
        """Analysis, then everything before the generator: 5 points, alignment, crops, blob."""
        self.analyse(slot, n_faces, mark, detect=detect)
        return self.prepare_swap(slot, n_faces, mark)

    def prepare_swap(self, slot: Slot, n_faces: int, mark: Marker = _no_mark) -> Staged | None:
        """From landmarks in the slot's buffers to the generator's input (the second half of
        :meth:`stage`)."""
        if n_faces == 0:
            return None
        n = n_faces
        fd = slot.faces_dev
        sw = self.swapper
        index = fd.frame_index[:n]
        five = self.five_point(fd.landmarks[:n])
        valid = fd.valid[:n] & (fd.presence[:n] >= PRESENCE_THRESHOLD)
        matrices, crops = sw.crops(slot.frames_dev, index, five)
        fd.fits[:n].copy_(mask_fits_window(matrices, sw.crop_px, sw.window_px))
        blob = sw.blob(crops)
        mark("align_crop")
        return Staged(index, matrices, crops, blob, fd.latents[:n], valid)

    def generate(self, staged: Staged, mark: Marker = _no_mark, stream: Any = None
                 ) -> torch.Tensor:
        """One generator call for every face: (N, 3, s, s) prediction in [0, 1]."""
        pred = self.swapper.predict(staged.blob, staged.latents, stream)
        mark("generate")
        return pred

    def finish(self, slot: Slot, staged: Staged, pred: torch.Tensor,
               mark: Marker = _no_mark) -> None:
        """Output to uint8 faces, colour match, paste-back into the frames in place."""
        sw = self.swapper
        faces = sw.colour_match(sw.to_faces(pred), staged.crops)
        mark("colour")
        sw.paste_(slot.frames_dev, staged.frame_index, faces, staged.matrices, staged.valid)
        mark("paste")

    def run(self, slot: Slot, n_faces: int, mark: Marker = _no_mark, *,
            detect: bool = True) -> None:
        """The whole tick eagerly (or inside one capture)."""
        staged = self.stage(slot, n_faces, mark, detect=detect)
        if staged is not None:
            self.finish(slot, staged, self.generate(staged, mark), mark)

"""Frames the capture thread put in pinned memory (``advanced.gpu.pinned_capture``) go to the GPU
from there: the face networks find in them what they find in frames copied through their own
staging, frame after frame, while the pinned blocks are given back and handed out again.

CUDA only (pinned memory needs it); this machine and CI have none, so these skip here and run
on the H200 with the other ``gpu`` tests."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from livecam.analysis.roi import roi_from_detection
from livecam.gpupipe.networks.host import pinned_copy, pinned_tensor
from livecam.gpupipe.networks.shared import SharedFaceNetworks, one_stream

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available"),
]


def _frames(t1_bgr: np.ndarray, n: int) -> list[np.ndarray]:
    """``n`` 1280x720 frames of insightface's group, each shifted 4 px from the last."""
    return [np.ascontiguousarray(t1_bgr[83 + 4 * (k % 8):803 + 4 * (k % 8)]) for k in range(n)]


def _follow(nets: object, frames: list[np.ndarray], pinned: bool,
            ) -> list[tuple[np.ndarray, list[np.ndarray | None]]]:
    """Each frame's detection boxes and meshes, the frame made as the capture thread makes it
    (``pinned_copy``) or as a plain copy; no frame is kept, so pinned blocks go back."""
    out = []
    for frame in frames:
        image = pinned_copy(frame) if pinned else frame.copy()
        if pinned:
            assert pinned_tensor(image) is not None
        faces = nets.detect(image)  # type: ignore[attr-defined]
        rois = [roi_from_detection(faces.boxes_xyxy[i], faces.keypoints_xy[i])
                for i in range(len(faces))]
        meshes = nets.landmarks(image, rois)  # type: ignore[attr-defined]
        out.append((faces.boxes_xyxy.copy(),
                    [None if m is None else m.landmarks_xy.copy() for m in meshes]))
        del image, faces, meshes
        gc.collect()  # the block is free now; the next frame may get it
    return out


def _assert_same(got: list, want: list) -> None:  # type: ignore[type-arg]
    assert len(got) == len(want)
    for (boxes, meshes), (boxes_ref, meshes_ref) in zip(got, want, strict=True):
        assert len(boxes) == len(boxes_ref) >= 1
        assert np.array_equal(boxes, boxes_ref)
        assert len(meshes) == len(meshes_ref)
        for m, m_ref in zip(meshes, meshes_ref, strict=True):
            assert (m is None) == (m_ref is None)
            if m is not None:
                assert np.array_equal(m, m_ref)


def test_a_stream_of_its_own_uploads_pinned_frames_without_its_staging(t1_bgr) -> None:  # type: ignore[no-untyped-def]
    frames = _frames(t1_bgr, 16)
    results = {}
    for pinned in (False, True):
        nets = one_stream(device="cuda", detector_model="full", min_score=0.5,
                               max_rois=8, keep_frames=4, pinned_capture=pinned)
        assert (nets.host_frames is pinned_copy) == pinned
        nets.open()
        try:
            nets.prepare(1280, 720)
            results[pinned] = _follow(nets, frames, pinned)
            staging = nets._own[(720, 1280)].staging
            # the pinned frames went up from where the capture put them, not via the staging
            assert bool(staging.any()) != pinned
        finally:
            nets.close()
    _assert_same(results[True], results[False])


def test_shared_networks_upload_pinned_frames_without_the_streams_staging(t1_bgr) -> None:  # type: ignore[no-untyped-def]
    frames = _frames(t1_bgr, 16)
    results = {}
    for pinned in (False, True):
        shared = SharedFaceNetworks(n_streams=2, device="cuda", detector_model="full",
                                    min_score=0.5, max_rois=8)
        nets = shared.slot_for(1, keep_frames=4, pinned_capture=pinned)
        nets.open()
        try:
            nets.prepare(1280, 720)
            results[pinned] = _follow(nets, frames, pinned)
            assert bool(nets._own[(720, 1280)].staging.any()) != pinned
        finally:
            nets.close()
    _assert_same(results[True], results[False])

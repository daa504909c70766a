"""The host-side reading of the shared face networks' outputs
(:mod:`livecam.gpupipe.networks.calls`):
a batch's detections and meshes read in one copy per output give each frame and each face
exactly what reading them one by one gave (the per-frame and per-face reads they replace are
written out here as the reference)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from livecam.analysis.mesh import MIN_PRESENCE
from livecam.gpupipe.networks.calls import MAX_DETECTIONS, batch_detections, mesh_results


def _one_frame(outputs_host: list[torch.Tensor], frame: int) -> list:
    """One frame's detections read on their own, a copy per detection (the reference)."""
    found = []
    for k in range(0, len(outputs_host), 4):
        boxes, points, scores, valid = (t.numpy()[frame] for t in outputs_host[k:k + 4])
        found += [(boxes[i].astype(np.float32), float(scores[i]), points[i].astype(np.float32))
                  for i in np.flatnonzero(valid)]
    return found


def _outputs(rng: np.random.Generator, frames: int, detectors: int,
             dtype: torch.dtype) -> list[torch.Tensor]:
    out = []
    for _ in range(detectors):
        valid = torch.from_numpy(rng.random((frames, MAX_DETECTIONS)) < 0.05)
        valid[1] = False  # a frame with nothing found
        out += [torch.from_numpy(rng.normal(300, 200, (frames, MAX_DETECTIONS, 4))).to(dtype),
                torch.from_numpy(rng.normal(300, 200, (frames, MAX_DETECTIONS, 6, 2))).to(dtype),
                torch.from_numpy(rng.random((frames, MAX_DETECTIONS))).to(dtype), valid]
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("detectors", [1, 2])
def test_batch_detections_are_each_frames_own(dtype: torch.dtype, detectors: int) -> None:
    rng = np.random.default_rng(3)
    outputs = _outputs(rng, 6, detectors, dtype)
    got = batch_detections(outputs, 5)  # the sixth frame's rows are padding: not read
    assert len(got) == 5 and got[1] == []
    assert sum(len(f) for f in got) > 5
    for frame in range(5):
        want = _one_frame(outputs, frame)
        assert len(got[frame]) == len(want)
        for (box, score, kps), (want_box, want_score, want_kps) in zip(got[frame], want,
                                                                       strict=True):
            assert box.dtype == kps.dtype == np.float32 and type(score) is float
            assert box.shape == (4,) and kps.shape == (6, 2)
            assert box.tobytes() == want_box.tobytes() and kps.tobytes() == want_kps.tobytes()
            assert score == want_score


def test_mesh_results_are_each_faces_own() -> None:
    rng = np.random.default_rng(4)
    lm = rng.normal(400, 100, (8, 468, 3)).astype(np.float32)
    presence = np.array([0.9, MIN_PRESENCE - 0.01, MIN_PRESENCE, 0.2, 0.99, 0.8, 0.7, 0.6],
                        np.float32)
    got = mesh_results(lm, presence, 6)  # rows 6 and 7 are padding
    assert len(got) == 6
    for i, result in enumerate(got):
        if presence[i] < MIN_PRESENCE:
            assert result is None
            continue
        assert result is not None
        assert result.landmarks_xy.flags.c_contiguous and result.landmarks_z.flags.c_contiguous
        assert result.landmarks_xy.tobytes() == np.ascontiguousarray(lm[i, :, :2]).tobytes()
        assert result.landmarks_z.tobytes() == lm[i, :, 2].copy().tobytes()
    lm[:] = 0  # the host buffer is written by the next batch: the results are copies
    assert all(r is None or r.landmarks_xy.any() for r in got)

"""CUDA-only checks: fp16 on the GPU and CUDA-graph capture of detector + mesh.

They need a CUDA device; this machine and CI have none, so they skip there (the lead runs
them on the GPU machine)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from livecam.analysis.gpu.facemesh import rois_from_detections

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available"),
]


def test_cuda_fp16_graph_replay_matches_cpu_fp32(short_detector, face_mesh, t1_tiles_bgr) -> None:  # type: ignore[no-untyped-def]
    import copy

    device = torch.device("cuda")
    det = copy.deepcopy(short_detector).to(device).half()
    mesh = copy.deepcopy(face_mesh).to(device).half()
    frames_cpu = torch.from_numpy(t1_tiles_bgr[:4])
    frames = frames_cpu.to(device)
    index = torch.arange(4, device=device)[:, None].expand(4, det.max_faces).reshape(-1)

    def run(images: torch.Tensor):  # type: ignore[no-untyped-def]
        out = det(images)
        rois = rois_from_detections(out.boxes_xyxy_px.reshape(-1, 4),
                                    out.keypoints_xy_px.reshape(-1, 6, 2))
        return out, mesh(images, index, rois)

    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(3):  # warm-up on the side stream before capture
            run(frames)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            static_out = run(frames)
        graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        ref = short_detector(frames_cpu)
    got = static_out[0]
    assert torch.equal(got.valid.cpu(), ref.valid)
    err = (got.boxes_xyxy_px.cpu() - ref.boxes_xyxy_px).abs().max()
    assert float(err) < 2.0
    assert np.isfinite(static_out[1].landmarks_px.float().cpu().numpy()).all()

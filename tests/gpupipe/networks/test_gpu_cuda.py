"""CUDA-only checks: fp16 on the GPU and CUDA-graph capture of detector + mesh.

They need a CUDA device; this machine and CI have none, so they skip there (the lead runs
them on the GPU machine)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from livecam.gpupipe.networks.facemesh import rois_from_detections

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


def test_compiled_networks_in_cuda_graphs_find_what_the_plain_ones_find(  # type: ignore[no-untyped-def]
        t1_bgr, tmp_path, caplog) -> None:
    """``advanced.gpu.compile_networks`` (the default) on CUDA: the detector, the mesh and the tile
    search compiled and captured in CUDA graphs, on insightface's group of six, against the
    same networks uncompiled; the start says it compiled them."""
    import logging

    from livecam.analysis.roi import roi_from_detection
    from livecam.gpupipe.networks.shared import one_stream
    from livecam.gpupipe.networks.tiles import GpuTileSearch
    from livecam.track.bytetrack import iou_matrix

    frame = np.ascontiguousarray(t1_bgr[83:803])  # 1280x720
    found = []
    for compile_dir in (None, tmp_path):
        nets = one_stream(device="cuda", detector_model="full", min_score=0.5, max_rois=8,
                               compile_dir=compile_dir)
        search = GpuTileSearch(nets, tile_size_px=640)
        with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
            nets.open()
            search.open()
            nets.prepare(frame.shape[1], frame.shape[0])
            search.prepare(frame.shape[1], frame.shape[0])
        try:
            image = frame.copy()
            faces = nets.detect(image)
            rois = [roi_from_detection(faces.boxes_xyxy[i], faces.keypoints_xy[i])
                    for i in range(len(faces))]
            meshes = nets.landmarks(image, rois)
            search.launch(image)
            tiled = search.take()
            assert tiled is not None
            found.append((faces, meshes, tiled))
        finally:
            search.close()
            nets.close()
    compiled_lines = [r.getMessage() for r in caplog.records if "compiled the" in r.getMessage()]
    assert any("face detector (full range)" in m for m in compiled_lines), compiled_lines
    assert any("face mesh" in m for m in compiled_lines), compiled_lines
    assert any("tile search" in m for m in compiled_lines), compiled_lines
    (faces, meshes, tiled), (faces_c, meshes_c, tiled_c) = found
    # the group's six people at 1280x720: the whole-frame pass finds three (H200 run 62)
    assert len(faces) == len(faces_c) >= 3, (len(faces), len(faces_c))
    assert iou_matrix(faces.boxes_xyxy, faces_c.boxes_xyxy).max(axis=1).min() > 0.95
    for mesh, mesh_c in zip(meshes, meshes_c, strict=True):
        assert (mesh is None) == (mesh_c is None)
        if mesh is not None and mesh_c is not None:
            assert np.linalg.norm(mesh.landmarks_xy - mesh_c.landmarks_xy, axis=1).mean() < 1.0
    assert len(tiled.faces) == len(tiled_c.faces), (len(tiled.faces), len(tiled_c.faces))


def test_the_face_followers_networks_wait_on_urgent_streams() -> None:
    """Their thread waits for each result; the swap's ticks beside them wait for nobody."""
    from livecam.gpupipe.networks.shared import one_stream

    nets = one_stream(device="cuda", detector_model="short")
    nets.open()
    try:
        greatest = torch.cuda.Stream.priority_range()[1]
        shared = nets.shared
        assert nets._stream.priority == greatest
        assert shared._stream.priority == greatest  # type: ignore[attr-defined]
        assert shared._side.priority == greatest  # type: ignore[attr-defined]
    finally:
        nets.close()


def test_small_batches_run_depthwise_convolutions_on_torchs_kernel(short_detector,  # type: ignore[no-untyped-def]
                                                                   t1_tiles_bgr) -> None:
    """cuDNN plans every depthwise convolution anew per batch size (about 2.4 s for the
    detector's first call, on each thread: a lone stream's start spent 36 s capturing graphs).
    Batches below ``CUDNN_DEPTHWISE_MIN_BATCH`` run them on PyTorch's own kernel; larger ones
    keep cuDNN; both find the same faces."""
    import collections
    import copy

    from torch.utils._python_dispatch import TorchDispatchMode

    from livecam.gpupipe.networks.tflite_torch import CUDNN_DEPTHWISE_MIN_BATCH

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    det = copy.deepcopy(short_detector).to("cuda").half()
    small = torch.from_numpy(t1_tiles_bgr[:4]).cuda()
    large = small.repeat(-(-CUDNN_DEPTHWISE_MIN_BATCH // 4), 1, 1, 1)
    found = {}
    for name, frames in (("small", small), ("large", large)):
        with torch.no_grad(), Ops() as ops:
            found[name] = det(frames)
        if name == "small":
            assert ops.names["_conv_depthwise2d"] > 0, ops.names
        else:
            assert ops.names["_conv_depthwise2d"] == 0, ops.names
    assert torch.equal(found["small"].valid, found["large"].valid[:4])
    err = (found["small"].boxes_xyxy_px - found["large"].boxes_xyxy_px[:4]).abs().max()
    assert float(err) < 1.0

"""The face follower's GPU backend (:class:`StreamFaceNetworks`) against its CPU networks, on real
photos: the same faces found, the same mesh on the same regions, one upload per frame, a
region with no face refused as MediaPipe refuses it. Run on the CPU here (the same torch code
as on CUDA, eager); the CUDA graph replay of the same calls is checked in test_gpu_cuda.py.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.analysis.roi import Roi, roi_from_detection
from livecam.gpupipe.networks.calls import mesh_buckets
from livecam.gpupipe.networks.client import StreamFaceNetworks
from livecam.gpupipe.networks.shared import one_stream


@pytest.fixture(scope="module")
def group_bgr(t1_bgr: np.ndarray) -> np.ndarray:
    """insightface's t1 (six people, 1280x886) cut to 1280x720 (``t1_bgr``: the installed
    wheel's, or ``$LIVECAM_TEST_PHOTOS/t1.png`` on a GPU machine without insightface)."""
    return np.ascontiguousarray(t1_bgr[83:803])


@pytest.fixture(scope="module")
def networks() -> StreamFaceNetworks:
    nets = one_stream(device="cpu", detector_model="full", min_score=0.5, max_rois=2)
    nets.open()
    return nets


def test_detections_match_the_cpu_detector(networks: StreamFaceNetworks,
                                           group_bgr: np.ndarray) -> None:
    from livecam.analysis.detect import BlazeFaceDetector

    cpu = BlazeFaceDetector(model="full", min_score=0.5, max_faces=64, tile_size_px=0)
    with cpu:
        ref = cpu.detect(group_bgr)
    got = networks.detect(group_bgr)
    assert len(ref) >= 3 and len(got) == len(ref)
    # the same faces: each CPU box has its GPU twin (MediaPipe's weighted NMS on the GPU, the
    # LiteRT path's own on the CPU: a few % of the face apart), keypoints as close
    from livecam.track.bytetrack import iou_matrix

    iou = iou_matrix(ref.boxes_xyxy, got.boxes_xyxy)
    for i, j in enumerate(iou.argmax(axis=1)):
        width = ref.boxes_xyxy[i, 2] - ref.boxes_xyxy[i, 0]
        assert iou[i, j] > 0.8
        assert np.abs(got.keypoints_xy[j] - ref.keypoints_xy[i]).max() < 0.08 * width
    assert np.all(np.diff(got.scores) <= 0)  # best first
    assert (got.track_ids == -1).all()


def test_mesh_matches_the_cpu_mesh_on_the_same_regions(networks: StreamFaceNetworks,
                                                       group_bgr: np.ndarray) -> None:
    from livecam.analysis.mesh import FaceMeshLandmarker

    faces = networks.detect(group_bgr)
    rois = [roi_from_detection(faces.boxes_xyxy[i], faces.keypoints_xy[i])
            for i in range(len(faces))]
    assert len(rois) > networks.max_rois  # the regions run in two batches
    got = networks.landmarks(group_bgr, rois)
    with FaceMeshLandmarker() as cpu:
        ref = cpu.landmarks(group_bgr, rois)
    for g, r in zip(got, ref, strict=True):
        assert (g is None) == (r is None)
        if g is not None and r is not None:
            assert g.landmarks_xy.shape == (468, 2) and g.landmarks_z.shape == (468,)
            assert np.linalg.norm(g.landmarks_xy - r.landmarks_xy, axis=1).mean() < 1.5


def test_a_region_without_a_face_has_no_mesh(networks: StreamFaceNetworks) -> None:
    blank = np.full((360, 480, 3), 90, np.uint8)
    cv2.circle(blank, (240, 180), 60, (30, 200, 30), -1)
    (result,) = networks.landmarks(blank, [Roi(240.0, 180.0, 200.0, 0.0)])
    assert result is None


def test_one_upload_per_frame_and_a_new_one_for_a_new_frame(
        networks: StreamFaceNetworks, group_bgr: np.ndarray,
        monkeypatch: pytest.MonkeyPatch) -> None:
    uploads: list[int] = []
    real = networks.new_frame
    monkeypatch.setattr(networks, "new_frame", lambda image: (uploads.append(1), real(image)))
    faces = networks.detect(group_bgr)
    rois = [roi_from_detection(faces.boxes_xyxy[0], faces.keypoints_xy[0])]
    networks.landmarks(group_bgr, rois)
    networks.landmarks(group_bgr, rois)
    assert len(uploads) == 1
    other = group_bgr.copy()  # same pixels, another frame
    networks.landmarks(other, rois)
    assert len(uploads) == 2


def test_auto_runs_both_models_and_merges_them(group_bgr: np.ndarray) -> None:
    nets = one_stream(device="cpu", detector_model="auto", min_score=0.5)
    nets.open()
    full = one_stream(device="cpu", detector_model="full", min_score=0.5)
    full.open()
    both, one = nets.detect(group_bgr), full.detect(group_bgr)
    assert len(both) >= len(one)
    # no face twice: merged boxes overlap little
    boxes = both.boxes_xyxy
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            ix = max(0, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]))
            iy = max(0, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]))
            assert ix * iy < 0.5 * min(np.prod(boxes[i, 2:] - boxes[i, :2]),
                                       np.prod(boxes[j, 2:] - boxes[j, :2]))


def test_buckets() -> None:
    assert mesh_buckets(1) == (1,)
    assert mesh_buckets(6) == (1, 2, 4, 6)


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same code runs on the CPU above)")
def test_cuda_graphs_fp16_match_the_cpu_backend(networks: StreamFaceNetworks,
                                                group_bgr: np.ndarray) -> None:
    from livecam.track.bytetrack import iou_matrix

    cuda = one_stream(device="cuda", detector_model="full", min_score=0.5, max_rois=2)
    cuda.open()
    cuda.prepare(group_bgr.shape[1], group_bgr.shape[0])  # graphs captured before use
    ref, got = networks.detect(group_bgr), cuda.detect(group_bgr)
    assert len(got) == len(ref) >= 3
    assert iou_matrix(ref.boxes_xyxy, got.boxes_xyxy).max(axis=1).min() > 0.9
    rois = [roi_from_detection(ref.boxes_xyxy[i], ref.keypoints_xy[i]) for i in range(len(ref))]
    for frame in (group_bgr, group_bgr.copy()):  # a second frame reuses the graphs
        mesh_gpu = cuda.landmarks(frame, rois)
    mesh_cpu = networks.landmarks(group_bgr, rois)
    for g, c in zip(mesh_gpu, mesh_cpu, strict=True):
        assert (g is None) == (c is None)
        if g is not None and c is not None:
            assert np.linalg.norm(g.landmarks_xy - c.landmarks_xy, axis=1).mean() < 1.0


def test_kept_frames_are_offered_to_the_swap(group_bgr: np.ndarray) -> None:
    nets = one_stream(device="cpu", detector_model="full", min_score=0.5, keep_frames=3)
    nets.open()
    assert nets.device_frame(group_bgr) is None  # nothing uploaded yet
    nets.detect(group_bgr)
    kept = nets.device_frame(group_bgr)
    assert kept is not None and np.array_equal(kept[0].numpy(), group_bgr)
    assert nets.device_frame(group_bgr.copy()) is None  # only the latest frame's image


def test_the_edge_strips_leave_the_frame_kept_for_the_swap(group_bgr: np.ndarray) -> None:
    """The follower's edge search runs the detector on the frame's mirrored edge strips
    (pictures of another size) after the frame's own calls: the swap still gets the frame's
    kept device copy, not None (which made it copy every frame into a pinned buffer on the
    host and upload it a second time)."""
    from livecam.analysis.edges import StripSearch

    nets = one_stream(device="cpu", detector_model="full", min_score=0.5, keep_frames=3)
    nets.open()
    frame = group_bgr.copy()
    nets.detect(frame)
    strips = StripSearch(nets).find(frame)
    assert len(strips) >= 4  # each strip a picture of its own (built on the device)
    kept = nets.device_frame(frame)
    assert kept is not None and np.array_equal(kept[0].numpy(), frame)
    assert nets.device_frame(group_bgr.copy()) is None  # still only that frame's image


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        "not __import__('torch').cuda.is_available()", reason="CUDA is not available")]),
])
def test_each_kept_frame_holds_its_own_frame_as_the_ring_turns(group_bgr: np.ndarray,
                                                                device: str) -> None:
    """The frame's copy kept for the swap is made by the detector's call (inside its CUDA
    graph on CUDA, one graph per kept place): over more frames than are kept, the latest
    frame's kept copy is that frame, and the detections are that frame's."""
    nets = one_stream(device=device, detector_model="full", min_score=0.5, keep_frames=2)
    nets.open()
    nets.prepare(group_bgr.shape[1], group_bgr.shape[0])
    mirror = np.ascontiguousarray(group_bgr[:, ::-1])
    boxes = {name: nets.detect(image.copy()).boxes_xyxy
             for name, image in (("photo", group_bgr), ("mirror", mirror))}
    assert len(boxes["photo"]) >= 3 and len(boxes["mirror"]) >= 3
    seen = set()
    for name, frame in (("photo", group_bgr.copy()), ("mirror", mirror.copy()),
                        ("photo", group_bgr.copy()), ("mirror", mirror.copy()),
                        ("photo", group_bgr.copy())):
        found = nets.detect(frame)
        np.testing.assert_allclose(found.boxes_xyxy, boxes[name], atol=0.5)  # this frame's
        kept = nets.device_frame(frame)
        assert kept is not None
        tensor, ready = kept
        if ready is not None:
            ready.synchronize()
        assert np.array_equal(tensor.cpu().numpy(), frame)
        seen.add(tensor.data_ptr())
    assert len(seen) == 2  # the two kept places, in turn


def test_wait_done_waits_only_for_work_not_done() -> None:
    """``query`` keeps the GIL where ``synchronize`` gives it up: done work is not waited on."""
    from livecam.gpupipe.networks.calls import wait_done

    class Event:
        def __init__(self, done: bool) -> None:
            self.done, self.waits = done, 0

        def query(self) -> bool:
            return self.done

        def synchronize(self) -> None:
            self.waits += 1

    done, running = Event(True), Event(False)
    wait_done(done)
    wait_done(running)
    assert (done.waits, running.waits) == (0, 1)


@pytest.mark.slow  # the torch face networks on the CPU: over a minute on 2 cores
def test_the_follower_on_the_gpu_networks_follows_what_the_cpu_follower_does(
        group_bgr: np.ndarray) -> None:
    """The one follower with the GPU pipeline's networks and tile search (torch ports, run on
    the CPU here, as ``livecam.gpupipe.factory.follower_networks`` builds them for CUDA)
    swaps-or-withholds the same faces of a still group photo as with the CPU networks."""
    from livecam.analysis import build_follower
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState
    from livecam.gpupipe.networks.tiles import GpuTileSearch

    analysis = load_config(None).analysis

    def follow(**parts: object) -> list[tuple[int, int]]:
        follower = build_follower(analysis, **parts)  # type: ignore[arg-type]
        from livecam.analysis.stage import AnalysisStage

        counts = []
        with AnalysisStage(follower) as stage:
            for i in range(6):
                p = stage.process(Packet.from_frame(Frame(i, i * 33_000_000, group_bgr),
                                                    RuntimeState()))
                counts.append((len(p.faces), len(p.withheld)))
        return counts

    nets = one_stream(device="cpu", detector_model=analysis.detector_model,
                           min_score=0.5, max_rois=max(1, analysis.max_faces))
    gpu = follow(networks=nets, search=GpuTileSearch(nets, tile_size_px=analysis.tile_size_px))
    cpu = follow()
    assert sum(gpu[-1]) == sum(cpu[-1]) == 6  # every person followed or withheld
    assert gpu[-1] == cpu[-1]

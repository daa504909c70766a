"""The follower's frame ring (livecam.analysis.gpu.ring) and frames loaded on the capture thread.

The ring's rules decide which frame the swap pastes onto: a slot reused too early would put one
frame's faces on another frame's pixels. The torch ports run on the CPU here (the same code as
on CUDA, without events or graphs; the CUDA run is in test_gpu_cuda.py's list).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from livecam.analysis.gpu.networks import GpuFaceNetworks
from livecam.analysis.gpu.ring import AHEAD, FrameRing
from livecam.analysis.roi import roi_from_detection


def _ring(keep: int = 2) -> FrameRing:
    return FrameRing(keep + AHEAD, 16, 16, device=torch.device("cpu"), cuda=False, keep=keep)


def _images(n: int) -> list[np.ndarray]:
    return [np.full((16, 16, 3), i, np.uint8) for i in range(n)]


def test_a_frame_loaded_ahead_is_claimed_without_loading_again() -> None:
    ring, (a,) = _ring(), _images(1)
    slot = ring.take(a)
    assert slot is not None
    slot.loading.release()
    claimed, ahead = ring.claim(a)
    assert claimed is slot and ahead


def test_the_capture_thread_always_leaves_a_slot_for_the_follower() -> None:
    ring = _ring(keep=2)
    images = _images(10)
    taken = []
    for image in images[:-1]:
        slot = ring.take(image)
        if slot is None:
            break
        slot.loading.release()
        taken.append(slot)
    assert len(taken) == len(ring.slots) - 1
    slot, ahead = ring.claim(images[-1])  # a frame nobody loaded ahead
    assert not ahead and slot not in taken
    slot.loading.release()


def test_kept_frames_are_never_loaded_again_while_kept() -> None:
    ring = _ring(keep=3)
    images = _images(40)
    kept: list[int] = []
    for i, image in enumerate(images[:20]):
        slot, ahead = ring.claim(image)
        if not ahead:
            slot.loading.release()
        kept = [*kept, slot.index][-3:]
        # the capture thread loads two frames ahead, then as many as it can
        for j in range(2):
            ahead_slot = ring.take(images[20 + (i + j) % 20])
            if ahead_slot is not None:
                assert ahead_slot.index not in kept
                ahead_slot.loading.release()


def test_frames_loaded_ahead_and_dropped_are_freed_by_a_later_claim() -> None:
    ring = _ring(keep=1)
    a, b = _images(2)
    slot_a, slot_b = ring.take(a), ring.take(b)
    assert slot_a is not None and slot_b is not None
    slot_a.loading.release()
    slot_b.loading.release()
    claimed, ahead = ring.claim(b)  # live mode dropped a on the way
    assert ahead and claimed is slot_b
    assert slot_a.image is None  # free again


def test_a_frame_the_follower_loads_itself_frees_no_frame_loaded_ahead() -> None:
    ring = _ring(keep=1)
    a, b = _images(2)
    slot_b = ring.take(b)
    assert slot_b is not None
    slot_b.loading.release()
    slot_a, ahead = ring.claim(a)  # the capture thread had no slot for a
    assert not ahead
    slot_a.loading.release()
    assert ring.claim(b) == (slot_b, True)


def test_close_waits_for_a_load_being_queued() -> None:
    ring, (a,) = _ring(), _images(1)
    slot = ring.take(a)
    assert slot is not None
    closer = threading.Thread(target=ring.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # the load still holds the slot
    slot.loading.release()
    closer.join(10)
    assert not closer.is_alive()
    assert ring.take(a) is None  # closed: nothing more is loaded ahead


def test_a_ring_too_small_to_keep_and_load_ahead_is_refused() -> None:
    with pytest.raises(ValueError, match=f"needs {3 + AHEAD}"):
        FrameRing(3 + AHEAD - 1, 16, 16, device=torch.device("cpu"), cuda=False, keep=3)


class _Loads:
    """The networks' loads, by the name of the thread that queued each."""

    def __init__(self, nets: GpuFaceNetworks, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[str] = []
        real = nets._load

        def load(slot: object, image: np.ndarray) -> None:
            self.threads.append(threading.current_thread().name)
            real(slot, image)  # type: ignore[arg-type]

        monkeypatch.setattr(nets, "_load", load)


def _nets(**options: object) -> GpuFaceNetworks:
    nets = GpuFaceNetworks(device="cpu", detector_model="full", min_score=0.5, max_rois=2,
                           **options)  # type: ignore[arg-type]
    nets.open()
    return nets


def test_a_frame_loaded_on_the_capture_thread_gives_the_same_faces_without_a_second_load(
        t1_bgr: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _nets()
    want = ref.detect(t1_bgr)
    rois = [roi_from_detection(want.boxes_xyxy[i], want.keypoints_xy[i]) for i in range(2)]
    want_mesh = ref.landmarks(t1_bgr, rois)

    nets = _nets(keep_frames=2)
    nets.prepare(t1_bgr.shape[1], t1_bgr.shape[0])
    loads = _Loads(nets, monkeypatch)
    frame = t1_bgr.copy()
    capture = threading.Thread(target=nets.preload, args=(frame,), name="capture")
    capture.start()
    capture.join()
    got = nets.detect(frame)
    got_mesh = nets.landmarks(frame, rois)
    assert loads.threads == ["capture"] and nets.loaded_ahead == 1
    np.testing.assert_allclose(got.boxes_xyxy, want.boxes_xyxy, atol=1e-3)
    for g, w in zip(got_mesh, want_mesh, strict=True):
        assert g is not None and w is not None
        np.testing.assert_allclose(g.landmarks_xy, w.landmarks_xy, atol=1e-3)
    kept = nets.device_frame(frame)
    assert kept is not None and np.array_equal(kept[0].numpy(), frame)


def test_each_kept_frame_holds_its_own_pixels_while_frames_load_ahead(
        t1_bgr: np.ndarray) -> None:
    """The swap reads a frame on the device up to keep_frames frames after it: frames loaded
    ahead meanwhile must land elsewhere, or faces are pasted onto another frame's pixels."""
    nets = _nets(keep_frames=3)
    nets.prepare(t1_bgr.shape[1], t1_bgr.shape[0])
    frames = [np.roll(t1_bgr, 7 * i, axis=1) for i in range(12)]
    kept: list[tuple[np.ndarray, torch.Tensor]] = []
    nets.preload(frames[0])
    nets.preload(frames[1])
    for i, frame in enumerate(frames):
        if i + 2 < len(frames):  # the capture thread runs two frames ahead, as offline
            nets.preload(frames[i + 2])
        nets.detect(frame)  # the follower moves to this frame
        on_device = nets.device_frame(frame)
        assert on_device is not None
        kept = [*kept, (frame, on_device[0])][-3:]
        for image, tensor in kept:
            assert np.array_equal(tensor.numpy(), image)
    assert nets.loaded_ahead == len(frames) and nets.not_loaded_ahead == 0


def test_with_load_on_capture_off_the_follower_loads_each_frame(
        t1_bgr: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    nets = _nets(load_on_capture=False)
    nets.prepare(t1_bgr.shape[1], t1_bgr.shape[0])
    loads = _Loads(nets, monkeypatch)
    nets.preload(t1_bgr)
    nets.detect(t1_bgr)
    assert loads.threads == [threading.current_thread().name]


def test_livecam_loads_each_frame_on_the_capture_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the runtime livecam run builds: its capture thread hands each frame to the first
    stage (the follower's GPU networks as the GPU pipeline makes them; torch ports on the CPU
    here, since CUDA is what the product needs and CI lacks)."""
    from livecam.analysis import build_follower
    from livecam.analysis.gpu.tiles import GpuTileSearch
    from livecam.analysis.stage import AnalysisStage
    from livecam.app import build_app
    from livecam.config import load_config

    config = load_config(None, ["pipeline.realtime=false", "control.api=false"])
    nets = GpuFaceNetworks(device="cpu", detector_model="full", min_score=0.5, max_rois=2,
                           keep_frames=2)
    follower = build_follower(config.analysis, networks=nets,
                              search=GpuTileSearch(nets, tile_size_px=0))
    loads = _Loads(nets, monkeypatch)
    app = build_app(config, input_spec="synthetic:320x240", output_spec="null",
                    max_frames=12, stages=[AnalysisStage(follower)])
    app.start()
    assert app.wait(120)
    app.stop()
    assert loads.threads.count("livecam-capture") >= 1
    assert nets.loaded_ahead == loads.threads.count("livecam-capture")


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same code runs on the CPU above)")
def test_cuda_frames_loaded_on_a_capture_thread_match_and_stay_kept(t1_bgr: np.ndarray) -> None:
    """On CUDA the loads run on their own stream from another thread, with a CUDA graph per
    slot: the follower's detections and mesh must be each frame's own, and the kept frames
    their own pixels, while the capture thread loads the next frames."""
    from livecam.track.bytetrack import iou_matrix

    ref = _nets()
    want = ref.detect(t1_bgr)
    cuda = GpuFaceNetworks(device="cuda", detector_model="full", min_score=0.5, max_rois=2,
                           keep_frames=3)
    cuda.open()
    cuda.prepare(t1_bgr.shape[1], t1_bgr.shape[0])
    blank = np.zeros_like(t1_bgr)
    frames = [t1_bgr.copy() if i % 2 == 0 else blank.copy() for i in range(16)]
    queued = [threading.Event() for _ in frames]

    def capture() -> None:
        for frame, event in zip(frames, queued, strict=True):
            cuda.preload(frame)
            event.set()

    thread = threading.Thread(target=capture, name="capture")
    thread.start()
    kept: list[tuple[np.ndarray, torch.Tensor, object]] = []
    for i, frame in enumerate(frames):
        queued[i].wait(60)  # as the mailbox: a frame reaches the follower once it is queued
        got = cuda.detect(frame)
        if i % 2 == 0:
            assert len(got) == len(want) >= 3
            assert iou_matrix(want.boxes_xyxy, got.boxes_xyxy).max(axis=1).min() > 0.9
        else:
            assert len(got) == 0
        on_device = cuda.device_frame(frame)
        assert on_device is not None
        kept = [*kept, (frame, *on_device)][-3:]
        for image, tensor, loaded in kept:
            loaded.synchronize()  # type: ignore[attr-defined]
            assert np.array_equal(tensor.cpu().numpy(), image)
    thread.join(60)
    assert cuda.loaded_ahead >= 1

"""Frames copied into pinned memory on the capture thread (livecam.analysis.gpu.pinned): a frame
is never rewritten while anything still holds it or its upload is in flight, the networks upload
a staged frame without a host copy of their own and find what they find in the plain one, and
``livecam run``'s capture thread hands the stages' staged frames on. Plain host memory on this
CPU (page-locked memory needs CUDA); the same code runs on the GPU."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from livecam.analysis.gpu.networks import GpuFaceNetworks
from livecam.analysis.gpu.pinned import PinnedFrames, host_source


def _image(value: int, shape: tuple[int, int, int] = (36, 64, 3)) -> np.ndarray:
    return np.full(shape, value, np.uint8)


class _Pending:
    """A CUDA event whose copy has not completed (no CUDA here): ``query`` says so."""

    def __init__(self) -> None:
        self.done = False

    def query(self) -> bool:
        return self.done


def test_a_staged_frame_holds_the_pixels_read_only_and_is_found_again() -> None:
    pool = PinnedFrames(pinned=False)
    image = _image(7)
    staged = pool.stage(image)
    assert staged is not image and np.array_equal(staged, image)
    assert not staged.flags.writeable  # the pipeline cannot write into the pool's memory
    found = pool.find(staged)
    assert found is not None
    tensor, _token = found
    assert np.array_equal(tensor.numpy(), image)
    assert pool.find(image) is None  # an image from elsewhere
    assert pool.find(staged[1:]) is None  # a part of a staged frame is not the frame
    assert pool.find(staged.copy()) is None  # a copy of it neither


def test_a_frame_still_held_is_never_rewritten() -> None:
    pool = PinnedFrames(pinned=False, max_frames=4)
    first = pool.stage(_image(1))
    part = first[:4]  # a view of a view holds the frame too
    second = pool.stage(_image(2))
    assert np.shares_memory(first, second) is False
    del first
    gc.collect()
    third = pool.stage(_image(3))
    assert not np.shares_memory(part, third)
    assert int(part[0, 0, 0]) == 1  # the view still reads its own frame
    del part
    gc.collect()
    fourth = pool.stage(_image(4))  # the first frame is free now: reused
    assert np.shares_memory(fourth, pool.find(fourth)[0].numpy())  # type: ignore[index]
    assert {id(pool.find(a)[1]) for a in (second, third, fourth)}.__len__() == 3  # type: ignore[index]


def test_a_frame_whose_upload_is_in_flight_is_not_reused() -> None:
    pool = PinnedFrames(pinned=False, max_frames=1)
    staged = pool.stage(_image(5))
    found = pool.find(staged)
    assert found is not None
    pending = _Pending()
    found[1].event = pending  # as :meth:`uploaded` leaves it on CUDA
    del staged, found
    gc.collect()
    image = _image(6)
    assert pool.stage(image) is image  # still uploading: the image is handed on as it is
    pending.done = True
    again = pool.stage(image)
    assert again is not image and np.array_equal(again, image)


def test_a_full_or_closed_pool_hands_the_image_on_unchanged() -> None:
    pool = PinnedFrames(pinned=False, max_frames=2)
    held = [pool.stage(_image(k)) for k in range(2)]
    image = _image(9)
    assert pool.stage(image) is image
    assert all(pool.find(h) is not None for h in held)
    pool.close()
    assert pool.stage(_image(3)).base is None  # closed: nothing staged
    assert all(pool.find(h) is None for h in held)  # the networks copy them as before
    assert [int(h[0, 0, 0]) for h in held] == [0, 1]  # still valid where held


def test_another_frame_size_or_type_is_handled() -> None:
    pool = PinnedFrames(pinned=False, max_frames=2)
    small = pool.stage(_image(1))
    del small
    gc.collect()
    big = pool.stage(_image(2, (72, 128, 3)))
    assert big.shape == (72, 128, 3) and pool.find(big) is not None
    grey = np.zeros((36, 64), np.uint8)
    assert pool.stage(grey) is grey
    floats = np.zeros((36, 64, 3), np.float32)
    assert pool.stage(floats) is floats


def test_host_source_copies_only_what_is_not_staged() -> None:
    pool = PinnedFrames(pinned=False)
    staging = np.zeros((36, 64, 3), np.uint8)
    import torch

    staging_t = torch.from_numpy(staging)
    staged = pool.stage(_image(4))
    source, token = host_source(pool, staged, staging_t, None)
    assert token is not None and source.data_ptr() != staging_t.data_ptr()
    assert not staging.any()  # no host copy
    source, token = host_source(pool, _image(8), staging_t, None)
    assert token is None and source is staging_t and int(staging[0, 0, 0]) == 8


def test_the_networks_find_in_a_staged_frame_what_they_find_in_the_plain_one(
        t1_bgr: np.ndarray) -> None:
    group = np.ascontiguousarray(t1_bgr[83:803])
    nets = GpuFaceNetworks(device="cpu", detector_model="full", min_score=0.5, keep_frames=2)
    assert nets.stage_capture(group) is group  # before open: nothing to stage into
    nets.open()
    try:
        plain = nets.detect(group.copy())
        staged = nets.stage_capture(group)
        assert staged is not group and np.array_equal(staged, group)
        got = nets.detect(staged)
        assert len(got) == len(plain) >= 3
        assert np.allclose(got.boxes_xyxy, plain.boxes_xyxy)
        frame, _ = nets.frame_on_device(staged)
        assert np.array_equal(frame[0].numpy(), group)
    finally:
        nets.close()
    assert nets.stage_capture(group) is group  # closed


def test_livecam_runs_capture_thread_hands_on_the_stages_staged_frames() -> None:
    from livecam.app import App
    from livecam.capture.sources import SyntheticSource
    from livecam.config import load_config
    from livecam.core.stage import StageBase
    from livecam.core.types import Packet
    from livecam.output.sinks import NullSink

    seen: list[Any] = []
    staged: list[Any] = []

    class Staging(StageBase):
        """A stage that stages captured images (as the GPU follower does) and records what
        the pipeline gives it."""

        name = "staging"

        def stage_capture(self, image: np.ndarray) -> np.ndarray:
            out = image.copy()
            out.flags.writeable = False
            staged.append(out)
            return out

        def process(self, packet: Packet) -> Packet:
            seen.append(packet.image_bgr)
            return packet

    config = load_config(None, ["pipeline.status_interval_s=0", "pipeline.realtime=false"])
    app = App(config, source=SyntheticSource(width=64, height=48, fps=30.0), sink=NullSink(),
              stages=[Staging()], max_frames=5)
    app.start()
    try:
        assert app.wait(timeout_s=60)
    finally:
        app.stop()
    assert len(seen) >= 5
    assert all(any(image is s for s in staged) for image in seen)


@pytest.mark.gpu
def test_on_cuda_a_staged_frame_is_page_locked_and_uploads_what_a_copied_one_does(
        t1_bgr: np.ndarray) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available (the same code runs on the CPU above)")
    group = np.ascontiguousarray(t1_bgr[83:803])
    nets = GpuFaceNetworks(device="cuda", detector_model="full", min_score=0.5, keep_frames=2)
    nets.open()
    try:
        nets.prepare(group.shape[1], group.shape[0])
        plain = nets.detect(group.copy())
        staged = nets.stage_capture(group)
        found = nets._pinned.find(staged) if nets._pinned is not None else None
        assert found is not None and found[0].is_pinned()
        got = nets.detect(staged)
        assert len(got) == len(plain) >= 3
        assert np.allclose(got.boxes_xyxy, plain.boxes_xyxy, atol=1e-3)
        frame, stream = nets.frame_on_device(staged)
        stream.synchronize()
        assert np.array_equal(frame[0].cpu().numpy(), group)
    finally:
        nets.close()

"""A picture that arrived as I420 (the thin client's decoded frames) reaches a virtual camera
whose device takes I420 as those very planes: no round trip through BGR, so not one value
changes (the round trip, FFmpeg's conversion to BGR and pyvirtualcam's back, moves them).

The virtual camera is the production ``VirtualCamSink`` → ``pyvirtualcam.Camera`` path with a
recording backend standing in for ``v4l2loopback`` (registered under that name through
pyvirtualcam's ``register_backend`` for the test's length); the output thread is the real one.
Real frames (the leak clip ``still_2``)."""

from __future__ import annotations

import sys
import threading

import cv2
import numpy as np
import pytest

from livecam.core.mailbox import Mailbox
from livecam.core.metrics import Metrics
from livecam.core.types import Frame, Packet, ReceivedI420
from livecam.output.sinks import VirtualCamSink, backend_takes_i420
from livecam.output.thread import OutputThread
from tests.helpers.leak_clips import leak_clips
from tests.helpers.virtualcam import Recording, register_recording_backend

W, H = 1280, 720


@pytest.fixture
def v4l2loopback(monkeypatch: pytest.MonkeyPatch) -> Recording:
    """A recording backend in place of pyvirtualcam's ``v4l2loopback`` (put back after)."""
    import pyvirtualcam

    backends = pyvirtualcam.camera.BACKENDS
    monkeypatch.setitem(backends, "v4l2loopback", backends.get("v4l2loopback"))
    return register_recording_backend("v4l2loopback")


def _received(index: int) -> tuple[Packet, np.ndarray]:
    """A packet whose picture arrived as I420 planes (converted to BGR as the thin client
    does, by FFmpeg), and those planes."""
    import av

    image, _ = next(f for k, f in enumerate(leak_clips()["still_2"].frames()) if k == index)
    planes = np.ascontiguousarray(cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420))
    decoded = av.VideoFrame.from_ndarray(planes, format="yuv420p")
    image_bgr = np.ascontiguousarray(decoded.to_ndarray(format="bgr24"))
    frame = Frame(index=index, t_capture_ns=0, image_bgr=image_bgr)
    packet = Packet.from_frame(frame).with_fields(
        received_i420=ReceivedI420(image_bgr, lambda: planes))
    return packet, planes


def _send_all(sink: VirtualCamSink, packets: list[Packet]) -> None:
    sink.open(width=W, height=H, fps=30.0)
    inbox: Mailbox[Packet] = Mailbox(policy="block")
    done = threading.Event()
    output = OutputThread(sink=sink, inbox=inbox, metrics=Metrics(), width=W, height=H,
                          fps=30.0, realtime=False, on_done=done.set)
    output.start()
    for packet in packets:
        inbox.put(packet)
    inbox.close()
    assert done.wait(30.0)
    assert output.error is None
    sink.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="v4l2loopback is Linux's")
def test_a_picture_received_as_i420_reaches_the_camera_as_those_planes(
        v4l2loopback: Recording) -> None:
    import pyvirtualcam

    received, planes = _received(0)
    other, _ = _received(10)
    local = np.zeros((H, W, 3), np.uint8)
    local[:, :, 2] = 200  # a BGR picture of the run's own (the cover card): converted here
    changed = received.with_fields(image_bgr=other.image_bgr)  # a stage drew over it
    _send_all(VirtualCamSink(backend="v4l2loopback", i420=True),
              [received, Packet.from_frame(Frame(1, 0, local)), changed])

    fourcc = pyvirtualcam.camera.encode_fourcc
    assert v4l2loopback.fourcc == fourcc(pyvirtualcam.PixelFormat.I420.value)
    first, cover, drawn = v4l2loopback.frames
    assert np.array_equal(first, planes)  # as received: not one value moved
    round_trip = cv2.cvtColor(received.image_bgr, cv2.COLOR_BGR2YUV_I420)
    assert not np.array_equal(round_trip, planes)  # what a BGR hand-over would have sent
    assert np.array_equal(cover, cv2.cvtColor(local, cv2.COLOR_BGR2YUV_I420))
    # the planes belong to the picture they came with, never to one drawn over it
    assert np.array_equal(drawn, cv2.cvtColor(other.image_bgr, cv2.COLOR_BGR2YUV_I420))


def test_a_local_run_and_other_backends_still_send_bgr(v4l2loopback: Recording) -> None:
    import pyvirtualcam

    received, _ = _received(0)
    _send_all(VirtualCamSink(backend="v4l2loopback"), [received])  # not the thin client
    fourcc = pyvirtualcam.camera.encode_fourcc
    assert v4l2loopback.fourcc == fourcc(pyvirtualcam.PixelFormat.BGR.value)
    assert np.array_equal(v4l2loopback.frames[0], received.image_bgr)


@pytest.mark.parametrize(("platform", "backend", "i420"), [
    ("linux", "v4l2loopback", True),  # native I420: written as it is
    ("win32", "obs", True),  # native NV12: I420 -> NV12 moves the chroma only
    ("win32", "unitycapture", False),  # native RGBA: BGR -> RGBA is a shuffle
    ("darwin", "obs", True),  # native UYVY: a repack
    ("linux", "recording", False),  # a backend registered by name: BGR, which all take
    ("freebsd14", "v4l2loopback", False),
])
def test_which_backends_are_sent_i420(platform: str, backend: str, i420: bool) -> None:
    assert backend_takes_i420(backend, platform) is i420



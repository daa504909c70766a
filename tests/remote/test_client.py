"""What the WHIP client hands aiortc's encoder (:func:`livecam.remote.client.feed_track`): the
camera frame converted to yuv420p once, by OpenCV, so the encoder converts nothing; colours
judged after the round trip the server makes (FFmpeg's conversion back to BGR); each new
camera frame as it arrives."""

from __future__ import annotations

import asyncio

import cv2
import numpy as np

from livecam.remote.client import FrameFeed, feed_track
from tests.helpers.leak_clips import leak_clips


def _sent(image: np.ndarray) -> object:
    feed = FrameFeed(fps=1000.0)
    feed.put(image)
    return asyncio.run(feed_track(feed).recv())


def test_the_camera_goes_to_the_encoder_as_yuv420p_with_its_colours() -> None:
    image, _ = next(leak_clips()["still_2"].frames())  # 1280x720, two real faces, noise
    frame = _sent(image)
    assert frame.format.name == "yuv420p"  # aiortc's encoders take it as it is
    assert (frame.width, frame.height) == (1280, 720)
    back = frame.to_ndarray(format="bgr24").astype(np.int16)  # as the server reads it
    shift = (back - image).mean(axis=(0, 1))
    assert np.abs(shift).max() < 1.5, shift  # FFmpeg's conversion both ways: 2.4-2.6
    assert np.abs(back - image).mean() < 2.5


def test_an_odd_sized_camera_goes_as_bgr() -> None:
    image = np.full((7, 9, 3), (10, 120, 230), np.uint8)  # no 4:2:0 layout for it
    frame = _sent(image)
    assert frame.format.name == "bgr24"
    assert np.array_equal(frame.to_ndarray(format="bgr24"), image)


def test_a_new_camera_frame_goes_at_once_not_at_the_next_tick() -> None:
    # at 0.01 fps the track's own ticks are 100 s apart: a frame that waited for the next
    # tick would not come within the 30 s below
    first, second = (np.full((4, 4, 3), v, np.uint8) for v in (40, 200))
    feed = FrameFeed(fps=0.01)

    async def run() -> tuple[object, object]:
        track = feed_track(feed)
        feed.put(first)
        one = await asyncio.wait_for(track.recv(), 30)
        feed.put(second)
        return one, await asyncio.wait_for(track.recv(), 30)

    one, two = asyncio.run(run())
    for frame, image in ((one, first), (two, second)):  # each the frame put just before
        back = frame.to_ndarray(format="bgr24").astype(np.int16)  # type: ignore[attr-defined]
        assert np.abs(back - image).max() < 3
    assert len(feed.send_waits_ms()) == 2
    assert one.pts < two.pts  # type: ignore[attr-defined]  # stamped when sent


def test_a_camera_frame_with_its_planes_goes_to_the_encoder_as_those_planes() -> None:
    # the planes a source decoded the camera frame from: no conversion from BGR (0.6 ms a
    # 720p frame), and the picture exactly as the camera gave it
    image, _ = next(leak_clips()["still_2"].frames())
    planes = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420)
    image_bgr = cv2.cvtColor(planes, cv2.COLOR_YUV2BGR_I420)  # what a reader hands the stages
    assert not np.array_equal(cv2.cvtColor(image_bgr, cv2.COLOR_BGR2YUV_I420), planes)
    feed = FrameFeed(fps=1000.0)
    feed.put(image_bgr, planes)
    frame = asyncio.run(feed_track(feed).recv())
    assert frame.format.name == "yuv420p"  # type: ignore[attr-defined]
    assert np.array_equal(frame.to_ndarray(), planes)  # type: ignore[attr-defined]


def test_planes_of_another_size_are_not_sent() -> None:
    image = np.full((8, 12, 3), (10, 120, 230), np.uint8)
    feed = FrameFeed(fps=1000.0)
    feed.put(image, np.zeros((6, 4), np.uint8))  # not this picture's planes
    frame = asyncio.run(feed_track(feed).recv())
    back = frame.to_ndarray(format="bgr24").astype(np.int16)  # type: ignore[attr-defined]
    assert np.abs(back - image).max() < 4


def test_the_thin_stage_hands_the_camera_planes_only_with_their_own_picture() -> None:
    from livecam.core.stage import source_i420_wanted
    from livecam.core.types import Frame, Packet, ReceivedI420
    from livecam.remote.thin import RemoteSwapStage

    image = np.full((8, 12, 3), 90, np.uint8)
    planes = np.full((12, 12), 77, np.uint8)
    frame = Frame(index=0, t_capture_ns=0, image_bgr=image,
                  received_i420=ReceivedI420.holding(image, planes))
    stage = RemoteSwapStage("http://127.0.0.1:9/whip", "t", fps=30.0)  # never opened
    assert source_i420_wanted([stage])  # the capture thread then copies the planes out
    out = stage.process(Packet.from_frame(frame))
    assert out.image_bgr is not image  # the cover: never the camera
    feed = stage._feed
    assert feed.planes_of(image) is planes
    other = image.copy()  # a picture a stage before it changed: its planes are not these
    stage.process(Packet.from_frame(frame).with_fields(image_bgr=other))
    assert feed.planes_of(other) is None

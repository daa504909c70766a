"""What the WHIP client hands aiortc's encoder (:func:`livecam.remote.client.feed_track`): the
camera frame converted to yuv420p once, by OpenCV, so the encoder converts nothing; colours
judged after the round trip the server makes (FFmpeg's conversion back to BGR); each new
camera frame as it arrives."""

from __future__ import annotations

import asyncio

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

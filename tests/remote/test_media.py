"""What goes back to a session (:class:`livecam.remote.media.SessionSink`): every new frame at
once, repeats of the last one (the output thread's pacing when the pipeline is slow) at most
every ``REPEAT_EVERY_S``: each frame handed over is a VP8 encode and a client decode. The
clock is the test's; the frames handed over are read back from the track's side."""

from __future__ import annotations

import asyncio

import numpy as np

from livecam.remote.media import REPEAT_EVERY_S, SessionSink


def test_new_frames_all_go_back_and_repeats_at_most_every_repeat_every_s() -> None:
    async def run() -> tuple[SessionSink, list[int]]:
        now = [0.0]
        sink = SessionSink(asyncio.get_running_loop(), clock=lambda: now[0])
        frames = [np.full((4, 4, 3), k, np.uint8) for k in range(3)]
        got: list[int] = []
        # the output thread at 30 fps: a new frame, then one second of repeats, twice
        for frame in frames[:2]:
            for _ in range(30):
                sink.send(frame)
                await asyncio.sleep(0)  # the loop runs the hand-over
                if sink._event.is_set():
                    image = await sink.next_frame()
                    assert image is not None
                    got.append(int(image[0, 0, 0]))
                now[0] += 1 / 30
        for frame in frames:  # new frames back to back: each goes
            sink.send(frame)
            await asyncio.sleep(0)
            image = await sink.next_frame()
            assert image is not None
            got.append(int(image[0, 0, 0]))
        return sink, got

    sink, got = asyncio.run(run())
    repeats, news = got[:-3], got[-3:]
    assert news == [0, 1, 2]  # new frames back to back: none held back
    assert repeats == sorted(repeats) and set(repeats) == {0, 1}
    most = 1 + int(1 / REPEAT_EVERY_S)  # the frame itself, then its repeats
    assert 2 <= repeats.count(0) <= most and 2 <= repeats.count(1) <= most, got
    assert sink.sent == len(got) and sink.sent + sink.repeats_skipped == 63


class _Decoded:
    """A decoded video frame as aiortc hands it over (``av.VideoFrame``'s surface), counting
    its conversions."""

    conversions = 0

    def __init__(self, value: int, width: int = 8, height: int = 6) -> None:
        self.width, self.height, self.value = width, height, value

    def to_ndarray(self, *, format: str) -> np.ndarray:
        assert format == "bgr24"
        _Decoded.conversions += 1
        return np.full((self.height, self.width, 3), self.value, np.uint8)


def test_only_the_frames_the_stream_takes_are_converted_and_resized() -> None:
    from livecam.remote.media import SessionSource

    source = SessionSource(fps=30)
    _Decoded.conversions = 0
    for k in range(30):  # a second of camera while the pipeline is busy
        source.push(_Decoded(k))
    source.open()
    image = source.read()
    assert image is not None and image.shape == (6, 8, 3) and int(image[0, 0, 0]) == 29
    assert _Decoded.conversions == 1 and source.overwritten == 29
    source.push(_Decoded(7, width=16, height=12))  # the browser changed resolution
    image = source.read()
    assert image is not None and image.shape == (6, 8, 3) and int(image[0, 0, 0]) == 7
    assert _Decoded.conversions == 2
    source.end()
    assert source.read() is None


def test_a_frame_the_encoder_did_not_take_before_a_newer_one_is_dropped_and_counted() -> None:
    # the track (the encoder's side, on the event loop) fell behind: three frames were
    # handed over before it took one; it gets the newest, never the older ones after it
    async def run() -> tuple[SessionSink, list[int | None]]:
        sink = SessionSink(asyncio.get_running_loop())
        for k in range(3):
            sink.send(np.full((4, 4, 3), k, np.uint8))
        await asyncio.sleep(0)  # the loop runs the three hand-overs
        image = await sink.next_frame()
        sink.send(np.full((4, 4, 3), 7, np.uint8))
        await asyncio.sleep(0)
        later = await sink.next_frame()
        sink.close()
        await asyncio.sleep(0)
        return sink, [None if i is None else int(i[0, 0, 0])
                      for i in (image, later, await sink.next_frame())]

    sink, got = asyncio.run(run())
    assert got == [2, 7, None]  # the newest, the next one, then the end
    assert sink.sent == 4 and sink.dropped == 2

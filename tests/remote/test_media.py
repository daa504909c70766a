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

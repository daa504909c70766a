"""The output's pacer (livecam.output.thread.Pacer), on a simulated clock: no sleeps."""

from __future__ import annotations

import pytest

from livecam.output.thread import _CATCH_UP, Pacer

PERIOD = 1 / 30


@pytest.mark.parametrize("phase", [0.0, 0.2, 0.45, 0.55, 0.8, 0.99])
def test_repeats_while_starting_do_not_delay_the_frames_after(phase: float) -> None:
    """Black frames are repeated every interval while the pipeline starts; then frames arrive
    at exactly the frame rate, at any phase against those repeats. Each must go out at once:
    when the repeats took tokens, the bucket stayed short by up to a frame for the whole run
    (every frame waited the same few to twenty ms)."""
    t = 0.0
    pacer = Pacer(PERIOD, t)
    for _ in range(30):  # a second of repeats, one an interval
        t += PERIOD
        pacer.sent(t, new=False)
    t += phase * PERIOD
    for _ in range(60):
        assert pacer.wait_s(t) == 0.0
        pacer.sent(t, new=True)
        t += PERIOD


def test_frames_faster_than_the_rate_are_held_to_it() -> None:
    """Frames offered twice as fast as the rate go out no faster than it (and the 1/16 it
    catches up with), on average."""
    t = 0.0
    pacer = Pacer(PERIOD, t)
    sent = 0
    while t < 2.0:
        wait = pacer.wait_s(t)
        if wait == 0.0:
            pacer.sent(t, new=True)
            sent += 1
        t += PERIOD / 2
    assert 60 <= sent <= 2.0 * 30 * (1 + _CATCH_UP) + 2  # 2 s at 30 fps (+1/16), the burst


@pytest.mark.parametrize("early", [0.1, 0.3, 0.5])
def test_a_frame_up_to_half_an_interval_early_goes_out_at_once(early: float) -> None:
    """Jitter: after frames on the grid, one that comes up to half an interval early is not
    held back."""
    t = 0.0
    pacer = Pacer(PERIOD, t)
    for _ in range(5):
        t += PERIOD
        assert pacer.wait_s(t) == 0.0
        pacer.sent(t, new=True)
    assert pacer.wait_s(t + PERIOD * (1 - early)) == pytest.approx(0.0, abs=1e-9)


def test_a_burst_of_frames_does_not_delay_the_rest_of_the_run() -> None:
    """Three frames at once (the first ones after start-up, or after a hiccup), then frames at
    exactly the rate: the wait the burst causes dies out within a few dozen frames. With the
    bucket refilled at exactly the rate it stayed for the whole run (a CPU `livecam run` at
    30 fps: every frame held 10 ms)."""
    t = 0.0
    pacer = Pacer(PERIOD, t)
    for _ in range(3):  # all three arrived at 0
        t += pacer.wait_s(t)
        pacer.sent(t, new=True)
    arrival = 0.0
    waits = []
    for _ in range(120):
        arrival += PERIOD
        now = max(arrival, t)
        wait = pacer.wait_s(now)
        t = now + wait
        pacer.sent(t, new=True)
        waits.append(wait)
    assert max(waits[:3]) > 0.01  # the burst did leave the bucket short
    assert max(waits[40:]) == 0.0
    assert sum(1 for w in waits if w > 0) < 40

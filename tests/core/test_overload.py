"""OverloadMonitor verdicts on plain numbers: when it warns, what it says, when it clears."""

from __future__ import annotations

import logging

import pytest

from livecam.core.overload import OverloadMonitor

S = 1_000_000_000


def feed(monitor: OverloadMonitor, *, seconds: float, t0_s: float = 0.0, fps_in: float = 30,
         fps_done: float = 30, latency_ms: float = 20.0, start: tuple[int, int, int] = (0, 0, 0)
         ) -> tuple[int, int, int]:
    """Tick every 0.25 s for ``seconds``: frames captured at ``fps_in``, processed at
    ``fps_done`` with ``latency_ms`` each. Returns the counters at the end."""
    captured, processed, total = start
    latencies: list[float] = []
    for k in range(1, int(seconds * 4) + 1):
        captured += round(fps_in / 4)
        done = round(fps_done / 4)
        processed += done
        total += done
        latencies = (latencies + [latency_ms] * done)[-1000:]
        monitor.update(now_ns=int((t0_s + k / 4) * S), captured=captured, processed=processed,
                       latencies_ms=latencies, latency_total=total)
    return captured, processed, total


def test_keeping_up_is_not_an_overload() -> None:
    monitor = OverloadMonitor(latency_budget_ms=250, drop_share_limit=0.2)
    feed(monitor, seconds=5, fps_done=28)  # a few drops, under 20 %
    assert not monitor.active and monitor.state.total_s == 0
    assert 0 < monitor.state.drop_share < 0.2


def test_half_the_frames_dropped_warns_within_the_window(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    monitor = OverloadMonitor(latency_budget_ms=250, drop_share_limit=0.2)
    counters = feed(monitor, seconds=3)
    caplog.set_level(logging.INFO)
    feed(monitor, seconds=1.25, t0_s=3, fps_done=15, start=counters)
    state = monitor.state
    assert state.active and "dropped" in state.reason and state.drop_share > 0.2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "overloaded" in warnings[0].getMessage()


def test_latency_over_budget_warns_and_clears_after_two_calm_seconds(
        caplog: pytest.LogCaptureFixture) -> None:
    monitor = OverloadMonitor(latency_budget_ms=100, drop_share_limit=0.2)
    counters = feed(monitor, seconds=2, latency_ms=300)
    assert monitor.active and "latency 300 ms" in monitor.state.reason
    caplog.set_level(logging.INFO)
    counters = feed(monitor, seconds=1.5, t0_s=2, start=counters)
    assert monitor.active  # calm for less than 2 s: no flapping
    feed(monitor, seconds=2, t0_s=3.5, start=counters)
    assert not monitor.active and monitor.state.total_s >= 2.0
    assert any("keeps up again" in r.getMessage() for r in caplog.records)


def test_a_hung_stage_is_an_overload() -> None:
    monitor = OverloadMonitor(latency_budget_ms=250, drop_share_limit=0.2)
    counters = feed(monitor, seconds=2)
    feed(monitor, seconds=1.25, t0_s=2, fps_done=0, start=counters)
    assert monitor.active and monitor.state.drop_share == 1.0


def test_no_camera_frames_is_not_an_overload() -> None:
    monitor = OverloadMonitor(latency_budget_ms=250, drop_share_limit=0.2)
    feed(monitor, seconds=3, fps_in=0, fps_done=0)
    assert not monitor.active

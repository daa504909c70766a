"""`livecam run` from a video file to a video file (issue 39 items 18 and 20): no camera,
virtual camera or window in it, so it runs offline by default (every frame, the input once)
and says so; an explicit `advanced.pipeline.realtime=true` is kept. The overload warning names the
stream and, for a file input, points at offline mode."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from livecam.core.overload import OverloadMonitor
from tests.daemon.conftest import write_clip

N_FRAMES = 24


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    frames = [np.full((48, 64, 3), 8 * k, np.uint8) for k in range(N_FRAMES)]
    return write_clip(tmp_path / "in.mp4", frames)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "run", *args,
                           "--set", "control.api=false", "--set", "control.hotkeys=false"],
                          capture_output=True, text=True, timeout=180, check=False)


def _frames_in(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_file_to_file_is_offline_by_default_every_frame_once(clip: Path,
                                                             tmp_path: Path) -> None:
    """Before: live mode, looping the input (advanced.capture.loop) until Ctrl-C, dropping frames on
    a slow machine."""
    out = tmp_path / "out.mp4"
    run = _run("--input", f"file:{clip}", "--output", f"file:{out}")
    assert run.returncode == 0, run.stderr
    assert "file to file: offline mode" in run.stderr, run.stderr
    assert "offline mode;" in run.stderr  # the "running:" line
    assert _frames_in(out) == N_FRAMES


def test_an_explicit_live_file_to_file_run_stays_live(clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    run = _run("--input", f"file:{clip}", "--output", f"file:{out}", "--frames", "5",
               "--set", "advanced.pipeline.realtime=true")
    assert run.returncode == 0, run.stderr
    assert "live mode;" in run.stderr, run.stderr
    assert "file to file" not in run.stderr


def test_overload_warning_names_the_stream_and_offline_mode_for_a_file(
        caplog: pytest.LogCaptureFixture) -> None:
    monitor = OverloadMonitor(latency_budget_ms=100, drop_share_limit=0.2, stream=1,
                              file_input=True)
    with caplog.at_level(logging.WARNING, logger="livecam.core.overload"):
        for k in range(12):  # 30 frames a second captured, 10 processed: 67 % dropped
            monitor.update(now_ns=k * 250_000_000, captured=k * 8, processed=k * 2,
                           latencies_ms=[50.0], latency_total=k)
    warning = next(r.getMessage() for r in caplog.records if "overloaded" in r.getMessage())
    assert warning.startswith("stream 1: pipeline overloaded")
    assert "advanced.pipeline.realtime=false" in warning

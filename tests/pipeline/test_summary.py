"""The last line of a run: whole-run figures, not the last second's."""

from __future__ import annotations

import subprocess
import sys

from livecam.core.metrics import Metrics
from livecam.pipeline.summary import RunSummary


def test_summary_counts_the_whole_run() -> None:
    metrics = Metrics()
    for name, n in (("captured", 300), ("processed", 240), ("sent", 290), ("repeated", 50),
                    ("dropped_capture", 45), ("dropped_pipeline", 15)):
        metrics.count(name, n)
    for ms in (10, 20, 30):
        metrics.record_latency_ns(ms * 1_000_000)
    summary = RunSummary.from_metrics(metrics, wall_s=10.0, overloaded_s=4.0)
    assert summary.fps_out == 29.0 and summary.fps_new == 24.0
    assert summary.dropped == 60 and summary.drop_share == 0.2
    line = summary.line()
    assert "10.0 s" in line and "29.0 fps" in line and "dropped 60 (20.0% of captured)" in line
    assert "latency mean 20.0 ms" in line and "overloaded for 4.0 s" in line


def test_livecam_run_ends_with_the_whole_run_line() -> None:
    result = subprocess.run([sys.executable, "-m", "livecam.cli", "run", "--input",
                             "synthetic:160x120", "--output", "null", "--frames", "45", "--set",
                             "control.api=false", "--set", "control.hotkeys=false"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    done = [line for line in result.stderr.splitlines() if "done:" in line]
    assert len(done) == 1 and "whole run" in done[0] and "sent 45 frames" in done[0], done
    fps = float(done[0].split("frames (")[1].split(" fps")[0])
    # 45 frames at 30 fps, start-up included: never above the 30 fps pacer (a lower bound
    # would measure how loaded the host is)
    assert 0 < fps <= 40

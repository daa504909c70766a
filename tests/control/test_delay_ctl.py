"""`livecam ctl delay MS` changes the A/V delay of a running app through the API; the status,
/metrics and the delivered latency follow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.control.conftest import Running

FRAME_MS = 1000 / 30


def ctl(running: Running, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", running.url,
                           "--token-file", str(running.token_file), *args],
                          capture_output=True, text=True, timeout=60)


def test_ctl_delay_sets_the_delay_live(running: Running) -> None:
    assert running.json("/api/status")["delay_ms"] == 0
    result = ctl(running, "delay", "120")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A/V delay: 120 ms"
    status = running.json("/api/status")
    assert status["delay_ms"] == 120
    _, body, _ = running.call("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["livecam_output_delay_seconds"].samples[0].value == 0.12
    # the frames sent from now on left 120 ms after capture, to one frame
    last = running.app.live.last()
    assert last is not None
    running.app.live.wait_newer(last.frames_sent + 40, timeout_s=20)
    recent = np.array(running.app.metrics.latencies_ms()[-20:])
    assert recent.min() >= 120 and np.median(recent) - 120 < FRAME_MS
    assert "A/V delay 120 ms" in ctl(running, "status").stdout


def test_ctl_delay_refuses_bad_values_in_one_line(running: Running) -> None:
    for value in ("5000", "-1", "nan", "inf"):
        result = ctl(running, "delay", value)
        assert result.returncode == 2, (value, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert running.json("/api/status")["delay_ms"] == 0

"""`livecam ctl delay MS` changes the A/V delay of a running app through the API; the status,
/metrics and the delivered latency follow."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.control.conftest import Running


def ctl(running: Running, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", running.url,
                           "--token-file", str(running.token_file),
                           "--set", "advanced.control.apply_wait_s=60", *args],
                          capture_output=True, text=True, timeout=60)


def test_ctl_delay_sets_the_delay_live(running: Running) -> None:
    assert running.json("/api/status")["delay_ms"] == 0
    result = ctl(running, "delay", "120")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A/V delay: 120 ms"
    status = running.json("/api/status")
    assert status["delay_ms"] == 120
    assert metric(running, "livecam_output_delay_seconds") == 0.12
    # every new frame sent from now on left at least 120 ms after capture (never early; how
    # close to 120 ms is scripts/measure_av_delay.py's figure: a loaded host adds to it)
    n0 = metric(running, "livecam_latency_seconds_count")
    deadline = time.monotonic() + 60
    while metric(running, "livecam_latency_seconds_count") < n0 + 22:
        assert time.monotonic() < deadline, "fewer than 22 new frames sent in 60 s"
        time.sleep(0.05)
    recent = np.array(running.app.metrics.latencies_ms()[-20:])
    assert recent.min() >= 120, recent
    assert "A/V delay 120 ms" in ctl(running, "status").stdout


def metric(running: Running, name: str) -> float:
    """One sample of /metrics, by its sample name (``_count`` of a histogram, or a gauge)."""
    _, body, _ = running.call("/metrics")
    return next(x.value for f in text_string_to_metric_families(body.decode())
                for x in f.samples if x.name == name)


def test_ctl_delay_refuses_bad_values_in_one_line(running: Running) -> None:
    for value in ("5000", "-1", "nan", "inf"):
        result = ctl(running, "delay", value)
        assert result.returncode == 2, (value, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert running.json("/api/status")["delay_ms"] == 0

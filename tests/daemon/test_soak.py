"""A 2-minute soak through ``scripts/soak.py``: the daemon swaps a real face while identities
and bypass are switched with `livecam ctl`; no RSS/fd/thread growth, no errors, exit 0.

The 30-minute figure is run by hand (see the script's docstring); this keeps the script
and the daemon's long-run behaviour working."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

SOAK = Path(__file__).parents[2] / "scripts" / "soak.py"

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="soak.py reads /proc")
def test_two_minute_soak_is_clean(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    # run from the repo root as a module: its harness uses the test helpers (not installed)
    result = subprocess.run([sys.executable, "-m", "scripts.soak", "--duration-s", "120",
                             "--warmup-s", "30", "--sample-every-s", "5", "--root",
                             str(tmp_path / "env"), "--json", str(out)], cwd=SOAK.parents[1],
                            capture_output=True, text=True, timeout=900)
    report = json.loads(out.read_text())
    summary = report["summary"]
    assert result.returncode == 0, (summary["failures"], result.stdout[-3000:])
    assert summary["failures"] == [] and summary["exit_code"] == 0
    assert summary["samples"] >= 10 and summary["frames_sent"] > 300
    assert summary["rss_growth_pct"] < 5
    assert summary["threads_end"] <= summary["threads_start"]
    assert summary["fds_end"] <= summary["fds_start"]
    # it really switched: several identities and bypass were live at sample times
    seen = {(s["identity"], s["bypass"]) for s in report["samples"]}
    assert len({name for name, _ in seen if name}) >= 2 and any(b for _, b in seen)
    assert summary["ctl_calls"] > 20 and summary["ctl_failures"] == 0
    assert "| minutes | RSS MB" in result.stdout


def _verdict_of(threads: list[int]) -> dict[str, Any]:
    """soak.py's verdict on samples taken after the warm-up whose thread counts are
    ``threads`` (all else steady)."""
    root = str(SOAK.parents[1])  # scripts/ is a package of the repo, not installed
    sys.path.insert(0, root)
    try:
        soak_py = importlib.import_module("scripts.soak")
    finally:
        sys.path.remove(root)
    samples = [{"t_s": 30.0 + 5 * k, "rss_mb": 270.0, "threads": n, "fds": 15,
                "fps_out": 30.0, "p99_ms": 40.0, "sent": 100 * k, "stage_errors": 0,
                "log_errors": 0, "non_json": 0} for k, n in enumerate(threads)]
    soak = SimpleNamespace(samples=samples, ctl_calls=30, ctl_failures=[])
    args = argparse.Namespace(warmup_s=30.0, duration_s=120.0, max_rss_growth_pct=5.0)
    return soak_py.verdict(soak, args, 0, 0.1)  # type: ignore[no-any-return]


def test_threads_that_come_and_go_are_no_leak_and_one_that_stays_is() -> None:
    """Two CI soaks on a loaded 2-core host failed with "threads grew 19.0 -> 21.0" (the
    medians of a quarter's four samples) and "17.0 -> 19.0" (the fewest of each quarter):
    the daemon's thread count sits at 19 with samples of 14 to 25 between (the looping
    clip's decoder threads end and start again). These are that second run's samples after
    the warm-up. A leak is a thread that stays."""
    ci_run = [19, 17, 19, 17, 19, 19, 19, 19, 14, 25, 19, 19, 19, 19, 21, 19, 19, 19, 19]
    assert _verdict_of(ci_run)["failures"] == []
    spikes_late = [19, 17, 19, 19, 18, 19, 19, 19, 19, 19, 21, 21, 19, 23, 19, 19, 17, 19]
    assert _verdict_of(spikes_late)["failures"] == []
    leaked = [19, 17, 19, 19, 18, 19, 19, 19, 19, 20, 20, 20, 21, 20, 21, 21, 22, 22]
    assert _verdict_of(leaked)["failures"] == ["threads grew 19.0 -> 21.0"]

"""Start-up errors under ``advanced.logging.json: true`` (issue 39 item 16): every stderr line is
one JSON record, and the error that ends the command is livecam's own ERROR record (it was plain
text, or on Linux a copy caught from the stderr file descriptor under the "native" logger)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_a_start_up_error_is_one_json_error_record(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "c"),
               XDG_DATA_HOME=str(tmp_path / "d"), XDG_CACHE_HOME=str(tmp_path / "k"))
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--set", "advanced.logging.json=true",
         "--input", f"file:{tmp_path / 'missing.mp4'}", "--output", "null"],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stderr
    records = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    errors = [r for r in records if r["level"] == "ERROR"]
    assert len(errors) == 1, records
    assert errors[0]["logger"] == "livecam" and "missing.mp4 does not exist" in errors[0]["msg"]
    assert result.stdout == ""


def test_opencv_log_lines_never_reach_stdout_at_debug(tmp_path: Path) -> None:
    # old: 17 "[DEBUG:0@0.9] global videoio_registry.cpp ..." lines on stdout (OpenCV writes
    # its INFO and DEBUG lines there) when a camera was tried with --log-level DEBUG
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "c"),
               XDG_DATA_HOME=str(tmp_path / "d"), XDG_CACHE_HOME=str(tmp_path / "k"))
    env.pop("OPENCV_LOG_LEVEL", None)
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--log-level", "DEBUG", "--input",
         "camera:0", "--output", "null", "--frames", "1"],
        capture_output=True, text=True, timeout=120, env=env)
    assert "camera" in result.stderr  # it did try the camera (none here, or one)
    assert result.stdout == "", result.stdout[:500]

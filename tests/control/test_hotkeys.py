"""Global hotkeys through pynput on a real X server (Xvfb), and off without a display."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.control.hotkeys import HotkeySource
from livecam.core.commands import CommandQueue

DRIVER = Path(__file__).with_name("hotkey_driver.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.display
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("xvfb-run") is None,
                    reason="xvfb-run is not installed (apt-get install xvfb xauth)")
def test_hotkeys_switch_identities_under_xvfb(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "c"), XDG_DATA_HOME=str(tmp_path / "d"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 640x480x24 +extension RECORD",
         sys.executable, str(DRIVER)], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["hotkeys_active"], result.stderr
    got = [(r["key"], r["active"], r["bypass"]) for r in report["results"]]
    assert got == [("2", "bob", False), ("]", "carol", False), ("]", "alice", False),
                   ("[", "carol", False), ("b", "carol", True), ("1", "alice", True),
                   ("b", "alice", False), ("9", "alice", False)]  # 9: no ninth identity
    print("hotkey -> state change, ms:", [r["ms"] for r in report["results"][:-1]])


def test_without_a_display_hotkeys_are_off_with_one_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    source = HotkeySource({"b": lambda: None}, CommandQueue())  # type: ignore[dict-item,return-value]
    with caplog.at_level(logging.INFO, logger="livecam.control.hotkeys"):
        started = source.start()
    assert started is False and not source.active
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("hotkeys off: no display")
    source.stop()  # idempotent when never started

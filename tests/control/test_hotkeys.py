"""Global hotkeys through pynput on a real X server (Xvfb), and off without a display."""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from livecam.control.hotkeys import HotkeySource
from livecam.core.commands import CommandQueue

DRIVER = Path(__file__).with_name("hotkey_driver.py")
REPO = Path(__file__).resolve().parents[2]


def drive(tmp_path: Path, mode: str) -> dict[str, Any]:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "c"), XDG_DATA_HOME=str(tmp_path / "d"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 640x480x24 +extension RECORD",
         sys.executable, str(DRIVER), mode], capture_output=True, text=True, timeout=180,
        env=env)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["hotkeys_active"], result.stderr
    return report


needs_xvfb = pytest.mark.skipif(shutil.which("xvfb-run") is None,
                                reason="xvfb-run is not installed (apt-get install xvfb xauth)")


@pytest.mark.display
@pytest.mark.slow
@needs_xvfb
def test_typing_elsewhere_changes_nothing_and_ctrl_alt_bindings_switch(tmp_path: Path) -> None:
    report = drive(tmp_path, "defaults")
    # the paragraph reached the other program, from pynput's Controller and from XTEST (so the
    # keys were really typed) ...
    assert report["typed"] == 2 * report["paragraph"] and "ok bob" in report["typed"]
    # ... and no global hotkey fired: with single-key defaults, "ok bob" toggled bypass twice
    # (the driver's sentinel press, Ctrl+Alt+3, selected carol afterwards)
    assert report["after_typing"] == {"changes": 0, "active": "carol", "bypass": False}
    # no warning about the hotkeys; an overload warning only says the loaded host dropped
    # frames (CI saw one at 57 %), which this test does not judge
    assert [w for w in report["warnings"] if not w.startswith("pipeline overloaded")] == []
    got = [(r["key"], r["active"], r["bypass"]) for r in report["results"]]
    a, b, c = "alice", "bob", "carol"
    assert got == [("2", b, False), ("n", c, False), ("n", a, False), ("p", c, False),
                   ("b", c, True), ("1", a, True), ("b", a, False), ("3", c, False),
                   ("1", a, False), ("2", b, False), ("3", c, False), ("p", b, False),
                   ("p", a, False), ("n", b, False), ("b", b, True), ("b", b, False),
                   ("3", c, False), ("1", a, False), ("n", b, False), ("p", a, False),
                   ("9", a, False)]  # 9: no ninth identity
    assert [r["changed"] for r in report["results"]] == [True] * 20 + [False]
    ms = [r["ms"] for r in report["results"][:-1]]
    print(f"Ctrl+Alt+key -> state change over {len(ms)} presses: median "
          f"{statistics.median(ms):.1f} ms, max {max(ms):.1f} ms")


@pytest.mark.display
@pytest.mark.slow
@needs_xvfb
def test_a_plain_key_binding_still_works_with_a_warning(tmp_path: Path) -> None:
    report = drive(tmp_path, "plain")  # control.key_bypass=b
    # every "b" typed in another window toggled bypass: what the warning is about
    assert report["after_typing"]["changes"] == 2 * report["paragraph"].count("b")
    assert any("hotkeys b are plain keys: they fire while you type" in w
               for w in report["warnings"]), report["warnings"]


@pytest.mark.display
@pytest.mark.slow
@needs_xvfb
def test_one_bad_binding_is_reported_and_skipped_and_bypass_still_works(tmp_path: Path) -> None:
    # old: one binding pynput could not parse turned every hotkey off, bypass included
    report = drive(tmp_path, "bad")  # control.key_next=<ctrl>+<alt>+<nosuchkey>
    got = [(r["key"], r["active"], r["bypass"], r["changed"]) for r in report["results"]]
    assert got == [("b", "carol", True, True), ("2", "bob", True, True),
                   ("b", "bob", False, True)]
    (line,) = [w for w in report["warnings"] if "skipped" in w]
    assert "<nosuchkey>" in line and "the other hotkeys work" in line


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

"""Hostile configs and ``--set`` values: refused with one short line, fast, in little memory.

Each case here was a defect (issue 11): an alias bomb grew ``livecam run`` to 6 GB, NaN passed
validation, huge numbers, deep lists and binary files printed tracebacks.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.cli import main
from livecam.config import load_config
from livecam.core.errors import ConfigError


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The classic "billion laughs": ``width ** levels`` strings in a few hundred bytes."""
    lines = [f"x0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "capture:\n  fourcc:\n" + "".join(f"    {line}\n" for line in lines)


def _cap_memory() -> None:  # runs in the child: the old code grew to 6 GB; stop it at 2 GiB
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("livecam: error: "), err
    assert len(lines[0]) < 400, lines[0]
    return lines[0]


def test_alias_bomb_is_refused_by_livecam_run(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    assert len(bomb.read_bytes()) < 600
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--config", str(bomb), "--input",
         "synthetic", "--output", "null", "--frames", "1"],
        capture_output=True, text=True, timeout=120, preexec_fn=_cap_memory,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "aliases" in lines[0], result.stderr[-2000:]


def test_alias_bomb_appended_to_a_config_gives_a_short_error(tmp_path: Path) -> None:
    # what SIGHUP / `ctl reload` runs: the daemon logs this message and keeps its config
    path = tmp_path / "daemon.yaml"
    path.write_text("pipeline:\n  realtime: true\n" + alias_bomb())
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert len(str(exc.value)) < 300
    assert "aliases" in str(exc.value)


def test_small_anchors_still_work(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("capture: &cap\n  width: 640\n  height: 480\n"
                    "swap:\n  assign: &order [largest]\n"
                    "analysis:\n  reference_photos: []\n")
    cfg = load_config(path)
    assert (cfg.capture.width, cfg.capture.height) == (640, 480)


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.inf", "1.0e+999"])
@pytest.mark.parametrize("key", ["capture.fps", "output.fps", "advanced.identity.warn_turn_deg",
                                 "advanced.capture.reconnect_max_s"])
def test_nan_and_inf_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}: .* is not a finite number$"):
        load_config(None, [f"{key}={value}"])


def test_nan_in_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("output:\n  fps: .nan\n")
    with pytest.raises(ConfigError, match=r"output\.fps: nan is not a finite number"):
        load_config(path)


def test_huge_float_int_is_refused_not_overflowed() -> None:
    with pytest.raises(ConfigError, match=r"capture\.fps: .* is not a finite number"):
        load_config(None, ["capture.fps=" + "9" * 4000])


@pytest.mark.parametrize(
    ("argv_tail", "needle"),
    [
        (["--set", "capture.fps=.nan"], "not a finite number"),
        (["--set", "output.fps=.nan"], "not a finite number"),
        (["--set", "capture.width=" + "9" * 5001], "cannot be read"),
        (["--set", "advanced.capture.fourcc=" + "[" * 20000 + "]" * 20000], "deeper than"),
        (["--set", "analysis.reference_photos=" + "[" * 20000 + "]" * 20000], "deeper than"),
        (["--set", "advanced.capture.fourcc=" + "{a: " * 3000 + "}" * 3000], "deeper than"),
        (["--set", "x" * 50_000 + "=1"], "unknown key"),
    ],
)
def test_set_values_exit_2_with_one_line(argv_tail: list[str], needle: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_exit_2(["run", "--input", "synthetic", "--output", "null", "--frames", "1",
                            *argv_tail], capsys)
    assert needle in line


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"capture:\n  fourcc: \xff\xfe\n", "not UTF-8"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not UTF-8"),
        (b"capture:\n  fps: 30\x00\n", "not YAML text"),
        (b"capture:\n  fps: 30\n" + b"# padding\n" * 200_000, "larger than"),
        (b"\xef\xbb\xbfcapture:\n  fps: [1, 2\n", "not valid YAML"),
        (b"capture: 0\n", "capture: expected a mapping"),
        (b"capture:\n  fourcc: &a [*a]\n", "advanced.capture.fourcc: expected a string"),
    ],
)
def test_bad_config_files_exit_2_with_one_line(tmp_path: Path, content: bytes, needle: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    line = one_line_exit_2(["run", "--config", str(path), "--input", "synthetic", "--output",
                            "null", "--frames", "1"], capsys)
    assert needle in line


def test_a_folder_as_config_is_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_exit_2(["run", "--config", str(tmp_path), "--input", "synthetic"], capsys)
    assert "is a folder" in line


def test_tracker_and_manifest_files_use_the_same_limits(tmp_path: Path) -> None:
    from livecam.engines.manifest import load_manifest
    from livecam.track.settings import load_bytetrack_settings

    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb().replace("capture:\n  fourcc:\n", "name:\n"))
    with pytest.raises(ConfigError, match="aliases"):
        load_bytetrack_settings(path)
    with pytest.raises(ConfigError, match="aliases"):
        load_manifest(path)


def test_reload_of_a_bombed_config_keeps_the_run_going(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    # before: SIGHUP with the bomb appended froze the daemon at 5 GB (the log line expanded it)
    import logging
    import time

    from livecam.app import App
    from livecam.capture.sources import SyntheticSource
    from livecam.output.sinks import NullSink
    from livecam.pipeline.passthrough import PassThrough

    path = tmp_path / "daemon.yaml"
    path.write_text("pipeline:\n  status_interval_s: 0\n")
    app = App(load_config(path), source=SyntheticSource(width=64, height=48, fps=30.0),
              sink=NullSink(), stages=[PassThrough()], config_loader=lambda: load_config(path))
    caplog.set_level(logging.INFO)
    app.start()
    try:
        path.write_text(path.read_text() + alias_bomb())
        app.request_reload()
        deadline = time.monotonic() + 60
        while not [r for r in caplog.records if "reloaded in" in r.getMessage()]:
            assert time.monotonic() < deadline, "the reload never finished"
            time.sleep(0.05)
        (refused,) = [r.getMessage() for r in caplog.records
                      if "config not reloaded" in r.getMessage()]
        assert "aliases" in refused and len(refused) < 400
        sent = app.metrics.counter("sent")
        deadline = time.monotonic() + 30
        while app.metrics.counter("sent") < sent + 5:  # frames still flow
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        app.stop()

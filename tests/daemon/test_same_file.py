"""An input given as the output, and a second writer of one output file (issue 39, items 2-3).

Run as a user runs livecam (the CLI entry point in a subprocess). The inputs are real H.264
clips and PNGs; the input is synthetic where only the output matters (no camera here).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.daemon.conftest import Daemon, write_clip

QUIET = ["--set", "control.api=false", "--set", "control.hotkeys=false"]


def livecam(*args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=180, env=env, cwd=cwd)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (96, 128, 3), dtype=np.uint8) for _ in range(8)]
    return write_clip(tmp_path / "source.mp4", frames)


def refused(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("livecam: error:") and words in lines[0], lines


@pytest.mark.parametrize("alias", ["same name", "relative", "symlink", "hard link"])
def test_an_input_given_as_the_output_is_refused_and_kept(tmp_path: Path, clip: Path,
                                                          alias: str) -> None:
    # before: the source was truncated (101 KB to 32 KB) by the output's encoder
    before = digest(clip)
    out = {"same name": clip, "relative": Path("source.mp4"),
           "symlink": tmp_path / "link.mp4", "hard link": tmp_path / "hard.mp4"}[alias]
    if alias == "symlink":
        out.symlink_to(clip)
    if alias == "hard link":
        os.link(clip, out)
    result = livecam("run", "--input", f"file:{clip}", "--output", f"file:{out}", *QUIET,
                     cwd=tmp_path)
    refused(result, "the same file")
    assert digest(clip) == before


def test_an_image_input_given_as_the_output_is_refused(tmp_path: Path) -> None:
    import cv2

    png = tmp_path / "still.png"
    cv2.imwrite(str(png), np.full((64, 64, 3), 90, np.uint8))
    before = digest(png)
    refused(livecam("run", "--input", f"image:{png}", "--output", f"file:{png}", "--frames",
                    "2", *QUIET), "the same file")
    assert digest(png) == before


def test_one_streams_output_is_another_streams_input(tmp_path: Path, clip: Path) -> None:
    second = tmp_path / "second.mp4"
    os.link(clip, tmp_path / "other-name.mp4")
    write_clip(second, [np.zeros((96, 128, 3), np.uint8)] * 4)
    kept = digest(clip), digest(second)
    # across two streams on the command line: stream 1's output is stream 0's input
    refused(livecam("run", "--input", f"file:{clip}", "--output", f"file:{tmp_path / 'a.mp4'}",
                    "--input", f"file:{second}", "--output",
                    f"file:{tmp_path / 'other-name.mp4'}", *QUIET), "the same file")
    # inside the config's streams
    config = tmp_path / "config.yaml"
    config.write_text(f"streams:\n  - input: file:{clip}\n    output: file:{second}\n"
                      f"  - input: file:{second}\n    output: file:{tmp_path / 'b.mp4'}\n")
    refused(livecam("run", "--config", str(config), *QUIET), "the same file")
    assert (digest(clip), digest(second)) == kept
    assert not (tmp_path / "a.mp4").exists() and not (tmp_path / "b.mp4").exists()


@pytest.mark.parametrize("option", ["--json", "--output"])
def test_analyze_refuses_its_input_as_its_json_or_output(tmp_path: Path, clip: Path,
                                                         option: str) -> None:
    # before: --json replaced the clip with the JSON; --output truncated it
    before = digest(clip)
    os.link(clip, tmp_path / "alias.mp4")
    target = str(tmp_path / "alias.mp4")
    args = (["--json", target] if option == "--json"
            else ["--json", str(tmp_path / "a.json"), "--output", f"file:{target}"])
    refused(livecam("analyze", "--input", f"file:{clip}", *args), "the same file")
    assert digest(clip) == before


def test_two_outputs_that_are_one_file_are_refused(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out.mp4"
    out.write_bytes(b"old recording")
    os.link(out, tmp_path / "alias.mp4")
    refused(livecam("run", "--input", "synthetic:64x48", "--output", f"file:{out}", "--input",
                    "synthetic:64x48", "--output", f"file:{tmp_path / 'alias.mp4'}", *QUIET),
            "named by two streams")
    assert out.read_bytes() == b"old recording"


def decoded_frames(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["hard link", "XDG_RUNTIME_DIR unset", "analyze --output"])
def test_a_second_writer_of_a_recording_is_refused_whatever_its_lock_dir(
        new_daemon: Callable[[], Daemon], how: str) -> None:
    # before: the lock was keyed by the path in $XDG_RUNTIME_DIR/livecam: a hard link, or a
    # livecam started without XDG_RUNTIME_DIR (cron, ssh, su), truncated the recording; and
    # `analyze --output file:` took no lock on its drawn video at all: it replaced the
    # recording with its own 5 frames
    first = new_daemon()
    out = first.root / "rec.mp4"
    first.start("--input", "synthetic:160x120", "--output", f"file:{out}", record=False)
    first.wait_ready(min_frames=20)
    env = first.env
    name = out
    if how == "hard link":
        name = first.root / "hard.mp4"
        os.link(out, name)
    elif how == "XDG_RUNTIME_DIR unset":
        env.pop("XDG_RUNTIME_DIR")
        env["HOME"] = str(first.root / "home")  # its own fallback lock dir, as under cron
    command = ["run", *QUIET]
    if how == "analyze --output":
        command = ["analyze", "--json", str(first.root / "faces.json")]
    second = subprocess.run(
        [sys.executable, "-m", "livecam.cli", *command, "--input", "synthetic:160x120",
         "--output", f"file:{name}", "--frames", "5"], env=env, capture_output=True,
        text=True, timeout=180)
    assert second.returncode == 1, second.stderr
    assert "already" in second.stderr and "Traceback" not in second.stderr, second.stderr
    assert first.proc is not None and first.proc.poll() is None
    sent = first.status()["frames"]["sent"]
    first.stop()
    assert first.proc.returncode == 0
    assert decoded_frames(out) >= sent  # the first recording is whole

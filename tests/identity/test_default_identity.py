"""`livecam run` without ``--identity`` (issue 39 item 8): a library that has identities is
used (the last used one, else the first) and the log says which; an empty library warns that
frames pass through unswapped. Run as a user runs it; state and library live in tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.config.identity import IdentityConfig
from livecam.identity import IdentityLibrary

pytestmark = pytest.mark.slow


def run(tmp: Path, lib: Path, photo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), XDG_DATA_HOME=str(tmp / "data"),
               XDG_CACHE_HOME=str(tmp / "cache"))
    return subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", f"image:{photo}", "--output",
         "null", "--frames", "2", "--set", f"identity.library_dir={lib}", "--set",
         "control.api=false", "--set", "control.hotkeys=false", *args],
        capture_output=True, text=True, timeout=240, env=env)


def test_no_identity_option_uses_the_last_used_else_the_first(
        tmp_path: Path, photos: dict[str, Path]) -> None:
    lib = tmp_path / "lib"
    library = IdentityLibrary(lib, IdentityConfig())
    for name in ("alice", "bob"):
        library.add(name, [photos["good"]])
    first = run(tmp_path, lib, photos["good"])
    assert first.returncode == 0, first.stderr[-2000:]
    assert "using 'alice', the library's first identity" in first.stderr
    chosen = run(tmp_path, lib, photos["good"], "--identity", "bob")
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    again = run(tmp_path, lib, photos["good"])
    assert again.returncode == 0, again.stderr[-2000:]
    assert "using 'bob', the identity last used" in again.stderr


def test_an_empty_library_warns_that_frames_pass_through(
        tmp_path: Path, photos: dict[str, Path]) -> None:
    result = run(tmp_path, tmp_path / "lib", photos["good"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "WARNING" in result.stderr and "frames pass through unswapped" in result.stderr

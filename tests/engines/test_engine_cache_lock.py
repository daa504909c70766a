"""The engine cache's lock held by another process, as `livecam engines clear` meets it: the
wait is said, bounded, and its end is one line (it was a silent wait of up to 600 s, then a
filelock.Timeout traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from livecam.core.errors import LivecamError
from livecam.engines.engine_cache import EngineCache

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process holding the engine cache's lock of ``tmp_path / "engines"`` until a line
    on its stdin."""
    root = tmp_path / "engines"
    root.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from filelock import FileLock
            with FileLock({str(root / ".lock")!r}):
                print("held", flush=True)
                sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:
        yield root, holder
    finally:
        holder.kill()
        holder.wait()


def test_a_wait_past_its_limit_is_one_error_naming_the_lock(
        held: tuple[Path, subprocess.Popen[str]]) -> None:
    root, _ = held
    with pytest.raises(LivecamError) as caught:
        EngineCache(root, lock_wait_s=1.5).clear()
    message = str(caught.value)
    assert "another livecam process" in message and str(root / ".lock") in message, message


def test_engines_clear_says_it_waits_for_another_process_then_goes_on(
        held: tuple[Path, subprocess.Popen[str]], tmp_path: Path) -> None:
    root, holder = held
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO),
                                                      os.environ.get("PYTHONPATH", "")]))
    clear = subprocess.Popen(
        [sys.executable, "-m", "livecam.cli", "engines", "clear", "--set",
         f"advanced.engine.cache_dir={root}"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert clear.stderr is not None
        said = clear.stderr.readline()  # blocks until the wait is said (or clear ends)
        assert "another livecam process" in said and "waiting" in said, said
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        _, err = clear.communicate(timeout=120)
    finally:
        if clear.poll() is None:
            clear.kill()
            clear.communicate()
    assert clear.returncode == 0, said + err
    assert "Traceback" not in err, err

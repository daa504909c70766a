"""The control API's token file when the livecam that makes it is killed, and when two make it
at once.

Before: the token file was created empty (``O_EXCL``) and then written. A livecam killed with
kill -9 between the two left an empty ``api-token``, and every later start ended in "empty:
delete it and restart livecam": the user had to mend by hand what a crash did. A second
livecam that read the file in that moment failed the same way. Now the token is written to a
temp file beside its target and linked to the target's name whole, so the file is there with
its token or not at all; the next start removes what a killed one left.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from livecam.config import Config
from livecam.pipeline.passthrough import PassThrough
from tests.control.conftest import NAMES, PhotoCatalog, start_running
from tests.core.stopped_write import REPO, WAIT_S, child_env, let_go, stopped, temp_files

pytestmark = pytest.mark.skipif(sys.platform == "win32",
                                reason="kill -9 and file modes are POSIX")

#: The token file and the temp file it is written to first (``.api-token.*.tmp``).
_TOKEN_FILES = "*api-token*"

#: Make the token of the file ``argv[0]`` through the code the control API starts with, and
#: print it.
_MAKE = ("from pathlib import Path\n"
         "from livecam.control.auth import load_or_create_token\n"
         "print('token', load_or_create_token(Path(argv[0])), flush=True)\n")

#: The same, saying "waiting" on stdout when it first asks for a file lock (Python's audit
#: event ``fcntl.flock``: filelock's lock on Linux and macOS).
_MAKE_SAYING_WHEN_IT_WAITS = ("import sys\n"
                              "said = []\n"
                              "def hook(event, args):\n"
                              "    if event == 'fcntl.flock' and not said:\n"
                              "        said.append(event)\n"
                              "        print('waiting', flush=True)\n"
                              "sys.addaudithook(hook)\n"
                              "argv = sys.argv[1:]\n" + _MAKE)


def _run(token_file: Path) -> list[str]:
    """`livecam run` with the control API on a free port, keeping its token in
    ``token_file``."""
    return ["run", "--input", "synthetic:160x120", "--output", "null", "--frames", "1",
            "--set", "control.api_address=127.0.0.1:0", "--set", "control.hotkeys=false",
            "--set", f"advanced.control.token_file={token_file}"]


def _start_and_call(config: Config, tmp_path: Path, astronaut_bgr: np.ndarray) -> str:
    """Start the app and its control API as tests/control do (token in tmp_path/cfg), call
    it with the token in the file, and stop it: the token."""
    running = start_running(config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES),
                            stages=[PassThrough()])
    try:
        assert running.token
        running.json("/api/status")  # 200 with the token in the file
    finally:
        running.app.stop()
    return running.token


def test_a_livecam_killed_before_it_wrote_the_token_does_not_block_the_next_start(
        fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray) -> None:
    token_file = tmp_path / "cfg" / "api-token"
    with stopped(_TOKEN_FILES, *_run(token_file), at="created") as (_, made):
        assert made.parent == token_file.parent
    # killed with the file made and nothing written to it
    token = _start_and_call(fast_config, tmp_path, astronaut_bgr)
    assert token_file.read_text() == token + "\n"
    assert oct(token_file.stat().st_mode & 0o777) == oct(0o600)
    assert temp_files(token_file.parent) == []


def test_a_livecam_killed_after_it_linked_the_token_leaves_it_whole_and_no_temp_file(
        fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray) -> None:
    token_file = tmp_path / "cfg" / "api-token"
    with stopped(".api-token.*.tmp", *_run(token_file), at="os.remove") as (_, tmp):
        assert tmp.parent == token_file.parent
    killed_ones = token_file.read_text()
    assert temp_files(token_file.parent) == [tmp.name]
    assert _start_and_call(fast_config, tmp_path, astronaut_bgr) + "\n" == killed_ones
    assert temp_files(token_file.parent) == []


def test_an_empty_token_file_an_older_livecam_left_is_replaced_at_the_next_start(
        fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray,
        caplog: pytest.LogCaptureFixture) -> None:
    """What a livecam before the atomic create left when killed between making the file and
    writing it: an empty ``api-token``. Every start since failed ("empty: delete it and
    restart") until the user deleted it by hand. Nobody can hold a token from an empty file,
    so a start now writes a new one there, and says so."""
    import logging

    token_file = tmp_path / "cfg" / "api-token"
    token_file.parent.mkdir(mode=0o700)
    token_file.touch(mode=0o600)
    with caplog.at_level(logging.WARNING, "livecam.control.auth"):
        token = _start_and_call(fast_config, tmp_path, astronaut_bgr)
    assert token_file.read_text() == token + "\n"
    assert oct(token_file.stat().st_mode & 0o777) == oct(0o600)
    assert temp_files(token_file.parent) == []
    assert any("was empty" in r.getMessage() for r in caplog.records)


def test_two_livecams_making_the_token_at_once_both_use_the_first_ones(tmp_path: Path) -> None:
    token_file = tmp_path / "cfg" / "api-token"
    with stopped(_TOKEN_FILES, "-c", _MAKE, str(token_file), at="created") as (first, _):
        second = subprocess.Popen([sys.executable, "-c", _MAKE_SAYING_WHEN_IT_WAITS,
                                   str(token_file)], cwd=REPO, env=child_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert second.stdout is not None
            line = second.stdout.readline()  # "" when it ended without waiting
            assert line == "waiting\n", (line, second.communicate(timeout=WAIT_S))
            assert second.poll() is None, "it went past the lock the first one holds"
            code, first_out, err = let_go(first)
            assert code == 0, err
            second_out, err = second.communicate(timeout=WAIT_S)
            assert second.returncode == 0, err
        finally:
            if second.returncode is None:
                second.kill()
                second.communicate(timeout=WAIT_S)
    tokens = {line.removeprefix("token ") for line in (first_out + second_out).splitlines()
              if line.startswith("token ")}
    assert tokens == {token_file.read_text().strip()}
    assert temp_files(token_file.parent) == []


def test_two_livecams_starting_on_an_empty_token_file_write_one_token(tmp_path: Path) -> None:
    """The empty file an older livecam left, and two starts at once: both find it empty
    before either takes the token lock (the test holds the lock until both wait for it).
    One writes a new token and says so; the other finds that token under the lock and uses
    it, rather than writing a second one over it (which would void the first one's)."""
    from filelock import FileLock

    from livecam.control.auth import token_lock_path

    token_file = tmp_path / "cfg" / "api-token"
    token_file.parent.mkdir(mode=0o700)
    token_file.touch(mode=0o600)
    lock = FileLock(str(token_lock_path(token_file)))
    lock.acquire(timeout=WAIT_S)
    starters = [subprocess.Popen([sys.executable, "-c", _MAKE_SAYING_WHEN_IT_WAITS,
                                  str(token_file)], cwd=REPO, env=child_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    try:
        for starter in starters:
            assert starter.stdout is not None
            line = starter.stdout.readline()  # "" when it ended without waiting
            assert line == "waiting\n", (line, starter.communicate(timeout=WAIT_S))
        assert token_file.read_text() == ""  # both saw it empty; neither went past the lock
        lock.release()
        ends = [starter.communicate(timeout=WAIT_S) for starter in starters]
    finally:
        lock.release()  # a no-op once released
        for starter in starters:
            if starter.returncode is None:
                starter.kill()
                starter.communicate(timeout=WAIT_S)
    for starter, (_, err) in zip(starters, ends, strict=True):
        assert starter.returncode == 0, err
    tokens = [line.removeprefix("token ") for out, _ in ends for line in out.splitlines()
              if line.startswith("token ")]
    assert len(tokens) == 2 and tokens[0] == tokens[1], tokens
    assert token_file.read_text() == tokens[0] + "\n" and len(tokens[0]) >= 32
    assert sum(err.count("was empty") for _, err in ends) == 1, [err for _, err in ends]
    assert oct(token_file.stat().st_mode & 0o777) == oct(0o600)
    assert temp_files(token_file.parent) == []

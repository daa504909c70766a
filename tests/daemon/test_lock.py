"""Device locks: one writer per camera, virtual camera and `file:` output, across processes.

The daemons here read the synthetic input (no camera on this machine) and write real H.264
files through the production FileSink; PyAV decodes what they wrote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from livecam.core.errors import ConfigError
from livecam.daemon.lock import DeviceBusyError, DeviceLock, device_keys, lock_file_name
from tests.daemon.conftest import Daemon, free_port


def decoded_frames(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_file_outputs_get_one_key_however_the_path_is_written(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    (tmp_path / "rec").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "rec")
    monkeypatch.chdir(tmp_path)
    keys = {device_keys("synthetic:", f"file:{p}")[0][0]
            for p in ("rec/out.mp4", str(tmp_path / "rec" / "out.mp4"), "link/out.mp4",
                      "./rec/../rec/out.mp4")}
    assert len(keys) == 1
    assert device_keys("synthetic:", "file:rec/other.mp4")[0][0] not in keys
    # files, windows and null are not exclusive as inputs or when nothing is written
    assert device_keys("file:rec/out.mp4", "null") == []
    assert device_keys("image:a.png", "window") == []
    # names that sanitise alike still get their own lock files
    assert lock_file_name("file-/a/b_c") != lock_file_name("file-/a_b/c")


def test_a_second_lock_on_the_same_file_is_refused_naming_the_holder(tmp_path: Path) -> None:
    keys = device_keys("synthetic:", f"file:{tmp_path / 'out.mp4'}")
    first = DeviceLock(keys, tmp_path / "locks")
    first.acquire()
    with pytest.raises(DeviceBusyError, match=rf"output file .*out\.mp4 is already used by "
                                              rf"another livecam \(pid {os.getpid()};"):
        DeviceLock(keys, tmp_path / "locks").acquire()
    first.release()
    first.release()  # idempotent
    with DeviceLock(keys, tmp_path / "locks"):
        pass


def test_a_lock_held_by_a_killed_process_does_not_block(tmp_path: Path) -> None:
    keys = device_keys("camera:3", "virtualcam")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib, time\n"
         "from livecam.daemon.lock import DeviceLock, device_keys\n"
         "lock = DeviceLock(device_keys('camera:3', 'virtualcam'), "
         f"pathlib.Path({str(tmp_path)!r}))\n"
         "lock.acquire()\nprint('held', flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(DeviceBusyError, match=f"pid {holder.pid}"):
        DeviceLock(keys, tmp_path).acquire()
    holder.send_signal(signal.SIGKILL)
    holder.wait(30)
    with DeviceLock(keys, tmp_path):  # the kernel dropped the dead process's lock
        pass


SYNTHETIC = ["--input", "synthetic:160x120"]


@pytest.mark.slow
def test_second_daemon_on_the_same_output_file_is_refused_and_the_recording_survives(
        new_daemon: Callable[[], Daemon]) -> None:
    first = new_daemon()
    out = first.root / "rec.mp4"
    first.start(*SYNTHETIC, "--output", f"file:{out}", record=False)
    first.wait_ready(min_frames=20)
    # the same file named another way (relative to another working directory)
    second = new_daemon()
    # not the runtime dir: it holds a `livecam` lock folder, which `python -m livecam.cli` would
    # import from the working directory as a namespace package (an editable install's finder
    # comes after it)
    elsewhere = first.root / "elsewhere"
    elsewhere.mkdir()
    second.start(*SYNTHETIC, "--output", "file:../rec.mp4", record=False, cwd=elsewhere)
    assert second.proc is not None and first.proc is not None
    assert second.proc.wait(120) == 1
    err = second.stderr()
    assert f"is already used by another livecam (pid {first.proc.pid}" in err
    assert "Traceback" not in err
    sent = first.status()["frames"]["sent"]
    assert first.proc.poll() is None
    first.stop()
    assert first.proc.returncode == 0
    # the first daemon's recording is whole: every frame it had sent is in it
    assert decoded_frames(out) >= sent


@pytest.mark.slow
def test_run_is_refused_on_a_file_a_daemon_writes_and_a_killed_daemon_frees_it(
        new_daemon: Callable[[], Daemon]) -> None:
    d = new_daemon()
    out = d.root / "rec.mp4"
    d.start(*SYNTHETIC, "--output", f"file:{out}", record=False)
    d.wait_ready(min_frames=10)
    assert d.proc is not None
    run = [sys.executable, "-m", "livecam.cli", "run", *SYNTHETIC, "--output", f"file:{out}",
           "--frames", "5", "--set", f"control.api_address=127.0.0.1:{free_port()}"]
    refused = subprocess.run(run, env=d.env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1
    assert f"is already used by another livecam (pid {d.proc.pid}" in refused.stderr
    assert d.proc.poll() is None
    # kill -9: no clean-up at all; the next start must not be blocked by a stale lock
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(30)
    assert any(p.suffix == ".lock" for p in (d.root / "run" / "livecam").iterdir())
    again = subprocess.run(run, env=d.env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert decoded_frames(out) == 5
    follower = new_daemon().start(*SYNTHETIC, "--output", f"file:{out}", record=False)
    status = follower.wait_ready(min_frames=5)
    assert status["output"] == f"file:{out}"
    assert json.loads(follower.ctl("--json", "status").stdout)["frames"]["sent"] >= 5


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX thing")
def test_two_streams_on_one_pipe_are_refused(tmp_path: Path) -> None:
    """A pipe's frames go to one reader each: two streams reading one (stdin twice, a FIFO by
    two names) split its frames between their outputs (120 frames came out as 69 and 47).
    Refused at start, like a camera named twice; a regular file may be read by any number."""
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    (tmp_path / "alias").symlink_to(fifo)
    clip = tmp_path / "clip.ts"
    clip.write_bytes(b"")
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", f"file:{fifo}", "--output",
         "null", "--input", f"file:{tmp_path / 'alias'}", "--output", "null",
         "--set", "control.api=false", "--set", "control.hotkeys=false"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"input pipe {tmp_path / 'alias'} is named by two streams (0 and 1)" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert device_keys(f"file:{clip}", "null") == []  # files: any number of readers
    assert device_keys(f"file:{tmp_path / 'missing.ts'}", "null") == []  # said at open


@pytest.mark.parametrize("where", ["a file", "under a file", "/proc"])
def test_a_lock_dir_that_cannot_be_made_is_one_line(tmp_path: Path, where: str) -> None:
    # before: a FileExistsError, NotADirectoryError or FileNotFoundError traceback
    (tmp_path / "plain").write_text("not a folder\n")
    lock_dir = {"a file": tmp_path / "plain", "under a file": tmp_path / "plain" / "locks",
                "/proc": Path("/proc/livecam-locks")}[where]
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", *SYNTHETIC, "--output",
         f"file:{tmp_path / 'out.mp4'}", "--frames", "2", "--set", "control.api=false",
         "--set", f"advanced.control.lock_dir={lock_dir}"], capture_output=True, text=True,
         timeout=120)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("livecam: error: advanced.control.lock_dir"), lines
    assert (tmp_path / "plain").read_text() == "not a folder\n"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
@pytest.mark.parametrize("shared", ["the folder", "its parent"])
def test_a_lock_dir_others_can_write_is_refused_before_anything_is_written(
        tmp_path: Path, shared: str) -> None:
    """With XDG_RUNTIME_DIR unset the lock dir is /tmp/runtime-UID/livecam, which another
    user can make first: their symlink named as a lock or pid file pointed the write (and
    the lock's truncation) at any file of the user who runs livecam."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # writable by everyone, no sticky bit
    lock_dir = open_dir if shared == "the folder" else open_dir / "livecam"
    lock_dir.mkdir(exist_ok=True)
    keys = device_keys("synthetic:", f"file:{tmp_path / 'out.mp4'}")
    lock_file = lock_dir / lock_file_name(keys[0][0])
    lock_file.symlink_to(victim)
    lock_file.with_suffix(".pid").symlink_to(victim)
    with pytest.raises(ConfigError, match="others can write"):
        DeviceLock(keys, lock_dir).acquire()
    assert victim.read_text() == "keep me\n"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_lock_dir_in_a_sticky_shared_folder_is_fine(tmp_path: Path) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others may add files but not move ours
    keys = device_keys("camera:0", "null")
    with DeviceLock(keys, sticky / "runtime" / "livecam"):
        pass
    assert (sticky / "runtime" / "livecam").stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a folder to another user needs root")
def test_a_lock_dir_another_user_owns_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "runtime-0"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(ConfigError, match="belongs to another user"):
        DeviceLock(device_keys("camera:0", "null"), theirs / "livecam").acquire()

"""The photo folders ``livecam serve`` makes (:mod:`livecam.remote.photo_folders`), on the real
filesystem: a session's folder goes at its end, a crashed server's folders go at the next start
(the crash is a real ``kill -9`` of a process holding its folder), and nothing livecam did not
make is deleted or followed: a user's folders and files, a symlink to elsewhere, a forged or
linked marker, a file or link put into livecam's own folder, another running server's folder."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.remote.photo_folders import MARKER, SessionFolder, marker_text, sweep

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges")

_HOLDER = """
import sys, time
from pathlib import Path
from livecam.remote.photo_folders import SessionFolder
folder = SessionFolder.make(Path(sys.argv[1]), sys.argv[2])
folder.write("1.jpg", b"\\xff\\xd8\\xff a photo")
print("ready", flush=True)
time.sleep(600)
"""


def _session_id() -> str:
    return secrets.token_urlsafe(16)


def _holder(root: Path, name: str) -> subprocess.Popen[str]:
    """A process that made ``root/name`` with a photo and holds it (a running server)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root), name],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _crashed(root: Path) -> Path:
    """A folder with a photo whose server was killed with SIGKILL."""
    name = _session_id()
    proc = _holder(root, name)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert (root / name / "1.jpg").is_file()
    return root / name


def test_a_session_folder_is_removed_at_its_end_and_what_others_put_there_stays(
        tmp_path: Path) -> None:
    root = tmp_path / "photos"
    folder = SessionFolder.make(root, _session_id())
    folder.write("1.jpg", b"one")
    folder.write("2.png", b"two")
    folder.unlink("1.jpg")
    assert sorted(p.name for p in folder.path.iterdir()) == [MARKER, "2.png"]
    assert (folder.path / MARKER).read_bytes() == marker_text(folder.name)
    folder.remove()
    assert list(root.iterdir()) == []
    folder.remove()  # idempotent

    other = SessionFolder.make(root, _session_id())
    other.write("1.jpg", b"one")
    (other.path / "notes.txt").write_text("the operator's")
    other.remove()
    assert (other.path / "notes.txt").read_text() == "the operator's"
    assert not (other.path / "1.jpg").exists()


def test_the_next_start_removes_a_crashed_servers_folder_only(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    root.mkdir()
    crashed = _crashed(root)
    live = _holder(root, _session_id())  # another server on the same photo_dir, running
    try:
        user_dir = root / _session_id()  # a session-like name, no marker: the user's
        user_dir.mkdir()
        (user_dir / "1.jpg").write_bytes(b"the user's")
        (root / "mine.jpg").write_bytes(b"the user's")
        forged = root / _session_id()  # a marker whose text is not livecam's
        forged.mkdir()
        (forged / MARKER).write_text("livecam serve: hello\n")
        (forged / "1.jpg").write_bytes(b"the user's")
        before = {p.name for p in root.iterdir()}

        assert sweep(root) == 1
        assert not crashed.exists()
        assert {p.name for p in root.iterdir()} == before - {crashed.name}
        assert (user_dir / "1.jpg").read_bytes() == b"the user's"
        assert (forged / "1.jpg").read_bytes() == b"the user's"
        assert (root / "mine.jpg").read_bytes() == b"the user's"
    finally:
        live.kill()
        live.wait(30)
    assert sweep(root) == 1  # the other server is gone now: its folder goes too
    assert sweep(tmp_path / "never-made") == 0


def test_cleanup_follows_no_symlink(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # a crashed server's folder, moved away and linked back under a session name
    moved = _crashed(elsewhere)
    link_name = _session_id()
    (root / link_name).symlink_to(moved)
    # a folder whose marker is a link to a file with the right text
    linked_marker = root / _session_id()
    linked_marker.mkdir()
    real_marker = elsewhere / "marker"
    real_marker.write_bytes(marker_text(linked_marker.name))
    (linked_marker / MARKER).symlink_to(real_marker)
    (linked_marker / "1.jpg").write_bytes(b"the user's")
    # a crashed folder with a photo-named link to a file elsewhere, and a user's file
    crashed = _crashed(root)
    target = elsewhere / "precious.jpg"
    target.write_bytes(b"precious")
    (crashed / "1.jpg").unlink()
    (crashed / "1.jpg").symlink_to(target)

    assert sweep(root) == 0
    assert (root / link_name).is_symlink() and (moved / "1.jpg").is_file()
    assert (moved / MARKER).is_file()
    assert real_marker.read_bytes() == marker_text(linked_marker.name)
    assert (linked_marker / "1.jpg").read_bytes() == b"the user's"
    assert target.read_bytes() == b"precious"
    assert (crashed / "1.jpg").is_symlink()
    assert os.path.isdir(crashed)

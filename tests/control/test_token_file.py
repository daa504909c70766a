"""The control API's token file as a careless config names it (``control.token_file``): a
folder, someone else's file, binary data. livecam makes or tightens only a file that holds a
token: before, it set a folder's or any named file's mode to 600 (``/etc/passwd`` as root) and
used the file's first line as the token; binary data was a UnicodeDecodeError traceback."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from livecam.control.auth import load_or_create_token, read_token
from livecam.core.errors import ConfigError

pytestmark = pytest.mark.skipif(sys.platform == "win32",
                                reason="file modes are POSIX (Windows keeps only read-only)")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_folder_named_as_the_token_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    with pytest.raises(ConfigError, match=r"is not a file: set control\.token_file"):
        load_or_create_token(folder)
    assert _mode(folder) == 0o755


def test_a_file_that_holds_no_token_is_refused_and_left_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/bin/sh\n")
    os.chmod(notes, 0o644)
    with pytest.raises(ConfigError, match="does not hold a livecam token"):
        load_or_create_token(notes)
    assert _mode(notes) == 0o644
    binary = tmp_path / "photo.jpg"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ConfigError, match="does not hold a livecam token"):
        read_token(binary)
    big = tmp_path / "big"
    big.write_text("a" * 100_000)
    with pytest.raises(ConfigError, match="does not hold a livecam token"):
        read_token(big)


def test_a_token_file_others_can_read_is_tightened_and_used(tmp_path: Path) -> None:
    path = tmp_path / "api-token"
    token = load_or_create_token(path)
    assert _mode(path) == 0o600 and len(token) >= 32
    os.chmod(path, 0o644)
    assert load_or_create_token(path) == token
    assert _mode(path) == 0o600


@pytest.mark.parametrize("where", ["beside a file", "under a file", "in /proc"])
def test_a_token_file_that_cannot_be_made_says_so(tmp_path: Path, where: str) -> None:
    # before: a NotADirectoryError or FileNotFoundError traceback (XDG_CONFIG_HOME naming a
    # file made `livecam run` end in one)
    (tmp_path / "plain").write_text("a file\n")
    path = {"beside a file": tmp_path / "plain" / "api-token",
            "under a file": tmp_path / "plain" / "livecam" / "api-token",
            "in /proc": Path("/proc/livecam/api-token")}[where]
    with pytest.raises(ConfigError, match=r"cannot be created .*: set control\.token_file"):
        load_or_create_token(path)
    assert (tmp_path / "plain").read_text() == "a file\n"


def _another_users(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``path`` (a link's target) another user's. As root (how CI runs) it is given to
    uid 4242 for real, and livecam runs as root: the case where ``chmod`` works on anyone's
    file. Otherwise livecam's own uid is made to differ, through ``os.geteuid``, the call
    livecam compares the owner with."""
    if os.geteuid() == 0:
        os.chown(path, 4242, 4242)
    else:
        me = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: me + 1)


@pytest.mark.parametrize("through_link", [False, True])
def test_a_token_file_another_user_owns_is_refused_and_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through_link: bool) -> None:
    """A token in a file another user owns is a token that user knows (and can replace): a
    start that used it would take that user's commands. Before, livecam running as root used
    it, and set it to 600 if needed, whoever owned it (``control.token_file`` in a shared
    folder such as /tmp, where anyone can make the file first)."""
    planted = tmp_path / "shared" / "livecam-token"
    planted.parent.mkdir()
    planted.write_text("a-token-someone-else-knows\n")
    os.chmod(planted, 0o600)
    _another_users(planted, monkeypatch)
    before = os.stat(planted)
    path = planted
    if through_link:
        path = tmp_path / "cfg" / "api-token"
        path.parent.mkdir(mode=0o700)
        path.symlink_to(planted)
    with pytest.raises(ConfigError) as raised:
        load_or_create_token(path)
    message = str(raised.value)
    assert "\n" not in message
    assert str(path) in message and "another user" in message
    assert "control.token_file" in message
    after = os.stat(planted)
    assert (after.st_uid, after.st_mode) == (before.st_uid, before.st_mode)
    assert planted.read_text() == "a-token-someone-else-knows\n"


def test_a_link_another_user_made_is_refused_and_its_target_left_alone(
        tmp_path: Path) -> None:
    """A link another user made, to a one-word file of livecam's own user that others can
    read (``/etc/hostname`` when livecam runs as root): its maker knows that word. Before, the
    start took the word as its token and set the file to 600. Needs root (to make a link that
    another user owns), which is how CI runs; elsewhere the test makes it as the user and
    checks the same refusal for a link owned by no one else is not made."""
    word = tmp_path / "etc" / "hostname"
    word.parent.mkdir()
    word.write_text("myhost\n")
    os.chmod(word, 0o644)
    link = tmp_path / "shared" / "livecam-token"
    link.parent.mkdir()
    link.symlink_to(word)
    if os.geteuid() != 0:  # a link of one's own to one's own token file is read through
        assert load_or_create_token(link) == "myhost"
        return
    os.lchown(link, 4242, 4242)
    with pytest.raises(ConfigError) as raised:
        load_or_create_token(link)
    message = str(raised.value)
    assert "\n" not in message and "another user" in message and str(link) in message
    assert _mode(word) == 0o644 and word.read_text() == "myhost\n"

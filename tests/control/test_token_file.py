"""The control API's token file as a careless config names it (``advanced.control.token_file``): a
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
    with pytest.raises(ConfigError, match=r"is not a file: set advanced\.control\.token_file"):
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
    with pytest.raises(ConfigError,
                       match=r"cannot be created .*: set advanced\.control\.token_file"):
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
    it, and set it to 600 if needed, whoever owned it (``advanced.control.token_file`` in a shared
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
    assert "advanced.control.token_file" in message
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


@pytest.mark.parametrize("mode", [0o777, 0o757, 0o703])
def test_a_token_folder_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    """Another user who can write the token's folder can delete the token at will (each start
    then makes a new one: 116 forced rotations in issue 39) or swap in one they know. Before,
    only the file was checked."""
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, mode)
    token = folder / "api-token"
    with pytest.raises(ConfigError) as raised:
        load_or_create_token(token)
    message = str(raised.value)
    assert "\n" not in message and "can be written by other users" in message
    assert f"chmod go-w {folder}" in message and "advanced.control.token_file" in message
    assert not token.exists() and _mode(folder) == mode  # nothing made, nothing changed
    made = tmp_path / "own" / "api-token"  # the folder livecam makes itself is 700
    assert load_or_create_token(made) and _mode(made.parent) == 0o700


def test_a_token_folder_with_the_sticky_bit_is_accepted(tmp_path: Path) -> None:
    folder = tmp_path / "tmp"
    folder.mkdir()
    os.chmod(folder, 0o1777)  # as /tmp: no one else can remove or rename the file
    token = folder / "api-token"
    assert load_or_create_token(token) == read_token(token)


def test_a_token_folder_another_group_can_write_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another group needs root (CI runs as root)")
    folder = tmp_path / "team"
    folder.mkdir()
    os.chown(folder, 0, 4242)
    os.chmod(folder, 0o770)
    with pytest.raises(ConfigError, match=r"can be written by other users \(mode 770\)"):
        load_or_create_token(folder / "api-token")


def test_a_token_folder_only_the_users_own_group_can_write_is_accepted(
        tmp_path: Path) -> None:
    """Where the umask is 002 (user private groups), folders are group-writable by a group
    of one: the user."""
    import grp
    import pwd

    me = pwd.getpwuid(os.geteuid())
    if grp.getgrgid(me.pw_gid).gr_name != me.pw_name or grp.getgrgid(me.pw_gid).gr_mem:
        pytest.skip("this user's primary group is not a private group")
    folder = tmp_path / "mine"
    folder.mkdir()
    os.chmod(folder, 0o775)
    assert load_or_create_token(folder / "api-token")


def test_a_token_folder_another_user_owns_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a folder another user owns needs root (CI runs as root)")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 4242, 4242)
    with pytest.raises(ConfigError, match=r"belongs to another user \(uid 4242\)"):
        load_or_create_token(folder / "api-token")
    assert not (folder / "api-token").exists()


def test_a_link_into_a_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "real-token").write_text("a-token\n")
    os.chmod(shared / "real-token", 0o600)
    os.chmod(shared, 0o777)
    link = tmp_path / "cfg" / "api-token"
    link.parent.mkdir(mode=0o700)
    link.symlink_to(shared / "real-token")
    with pytest.raises(ConfigError, match="can be written by other users"):
        load_or_create_token(link)

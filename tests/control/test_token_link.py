"""A control API token file that is a symbolic link.

A link to a token is read through (dotfile managers link config files). A link to an empty
file, or to none, is never written through: livecam did not leave it (its creates, the old
``O_EXCL`` one and today's hard link, fail on a link), so whoever made the link chose where a
new secret would go: a file they can read, or one they can later swap for a token of theirs.
Before, such a start stopped with "is empty: start `livecam run` once", which was the very
command that failed (and, for a link to nothing, "no token: start `livecam run` once").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from livecam.cli import main
from livecam.control.auth import load_or_create_token
from livecam.core.errors import ConfigError
from tests.core.stopped_write import temp_files

pytestmark = pytest.mark.skipif(sys.platform == "win32",
                                reason="symbolic links need a privilege on Windows")


def _link(tmp_path: Path, target_text: str | None) -> tuple[Path, Path]:
    """(``cfg/api-token``, the file elsewhere it links to, holding ``target_text``; None:
    no file there)."""
    target = tmp_path / "elsewhere" / "token"
    target.parent.mkdir()
    if target_text is not None:
        target.write_text(target_text)
        os.chmod(target, 0o600)
    link = tmp_path / "cfg" / "api-token"
    link.parent.mkdir(mode=0o700)
    link.symlink_to(target)
    return link, target


@pytest.mark.parametrize(("target_text", "why"), [("", "is empty"), ("\n", "is empty"),
                                                   (None, "does not exist")])
def test_a_link_to_no_token_is_refused_with_what_to_do_and_nothing_written(
        tmp_path: Path, target_text: str | None, why: str) -> None:
    link, target = _link(tmp_path, target_text)
    with pytest.raises(ConfigError) as raised:
        load_or_create_token(link)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"control API token file {link} is a symbolic link to {target}, "
                              f"which {why}: ")
    assert f"delete the link {link}" in message
    assert link.is_symlink() and os.readlink(link) == str(target)
    if target_text is None:
        assert not os.path.lexists(target)
    else:
        assert target.read_text() == target_text
    assert temp_files(tmp_path) == []


def test_ctl_says_the_same_in_one_line(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    link, target = _link(tmp_path, "")
    with pytest.raises(SystemExit) as exc:
        main(["ctl", "--token-file", str(link), "--url", "http://127.0.0.1:9", "status"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    assert out == ""
    assert err.startswith(f"livecam: error: control API token file {link} is a symbolic link")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert target.read_text() == ""


def test_a_link_to_a_token_is_read_through(tmp_path: Path) -> None:
    link, target = _link(tmp_path, "a-token-made-elsewhere\n")
    assert load_or_create_token(link) == "a-token-made-elsewhere"
    assert link.is_symlink() and target.read_text() == "a-token-made-elsewhere\n"


def test_a_token_others_can_read_that_livecam_cannot_tighten_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link to a token file of another user that others can read: livecam cannot set it to
    600 (it is not the owner), and a token other users can read lets them control livecam, so
    the start stops with what to do, not with a traceback from ``chmod``. Every test here runs
    as root, whose chmod always works: the refusal a non-owner gets is made through
    ``os.chmod``, the call livecam makes."""
    token = "t" * 43
    link, target = _link(tmp_path, f"{token}\n")
    os.chmod(target, 0o644)

    def not_the_owner(path: object, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(os, "chmod", not_the_owner)
    with pytest.raises(ConfigError) as info:
        load_or_create_token(link)
    message = str(info.value)
    assert "\n" not in message
    assert str(link) in message and "644" in message and "other users" in message
    assert "chmod 600" in message and "advanced.control.token_file" in message
    assert target.read_text() == f"{token}\n"

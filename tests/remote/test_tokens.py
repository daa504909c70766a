"""The WHIP users' tokens (``livecam serve token add/remove``), in the fast tier: the remote
package's other tests start a real ``livecam serve`` and are slow (issue 43 item 6: plain
``pytest`` covers every package)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from livecam.core.errors import ConfigError, UsageError
from livecam.remote.tokens import TokenStore


def test_a_token_names_its_user_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    alice, bob = store.add("alice"), store.add("bob")
    assert store.user_of(alice) == "alice" and store.user_of(bob) == "bob"
    assert store.user_of("not-a-token") is None
    assert store.names() == ["alice", "bob"]
    text = store.path.read_text(encoding="utf-8")
    assert alice not in text and bob not in text
    if sys.platform != "win32":
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_a_new_token_replaces_the_old_and_remove_revokes(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    old = store.add("alice")
    new = store.add("alice")
    assert store.user_of(old) is None and store.user_of(new) == "alice"
    store.remove("alice")
    assert store.user_of(new) is None and store.names() == []


@pytest.mark.parametrize("name", ["", "-dash", "a b", "x" * 65, "ä"])
def test_a_bad_user_name_is_refused_and_nothing_is_written(tmp_path: Path, name: str) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    with pytest.raises(UsageError, match="user name"):
        store.add(name)
    assert not store.path.exists()


def test_removing_an_unknown_user_names_the_users(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    store.add("alice")
    with pytest.raises(UsageError, match=r"no user 'bob' \(users: alice\)"):
        store.remove("bob")


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"users": {"a": 1}}'])
def test_a_file_that_is_not_a_tokens_file_is_one_clear_error(tmp_path: Path,
                                                              content: bytes) -> None:
    path = tmp_path / "tokens.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="is not a livecam tokens file"):
        TokenStore(path).user_of("anything")

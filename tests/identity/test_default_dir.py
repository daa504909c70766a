"""Where the identity library lives by default (``identity.library_dir`` empty): a folder of
its own in the user data dir, with the records one level down, not
``…/identities/identities/NAME.json`` (issue 39 item 20). A library an earlier livecam made
at the old default is used where it is, untouched. The user data dir is tmp_path
(``XDG_DATA_HOME``, which platformdirs follows on Linux)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from livecam.config.identity import IdentityConfig
from livecam.identity import IdentityLibrary

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="XDG_DATA_HOME moves the user data dir on Linux only")


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    return tmp_path


def test_the_default_library_is_not_nested(data_home: Path, photos: dict[str, Path]) -> None:
    library = IdentityLibrary.from_config(IdentityConfig())
    library.add("alice", [photos["good"]])
    records = [p.relative_to(data_home) for p in data_home.rglob("alice.json")]
    assert records == [Path("livecam/library/identities/alice.json")]
    assert not any(p.is_dir() for p in data_home.rglob("identities/identities"))


def test_a_library_at_the_old_default_is_used_where_it_is(data_home: Path,
                                                          photos: dict[str, Path]) -> None:
    old = data_home / "livecam" / "identities"
    IdentityLibrary(old, IdentityConfig()).add("bob", [photos["good"]])
    library = IdentityLibrary.from_config(IdentityConfig())
    assert library.root == old and library.names() == ["bob"]
    library.add("carol", [photos["good"]])
    assert (old / "identities" / "carol.json").is_file()
    assert not (data_home / "livecam" / "library").exists()  # nothing moved or duplicated

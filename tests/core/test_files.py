"""Atomic writes' temp files: which ones a writer's tidy takes for a file's, and removes; and
atomic creates: whole or not at all, and only the first."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

import pytest

from livecam.core.files import atomic_create, atomic_write, remove_temp_files, temp_files


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Temp files of pins.json and of other files, and files that only look like them."""
    for name in [".pins.json.a1b2_c3d.tmp", ".pins.json.zz9yy8xx.tmp",  # pins.json's
                 ".pins.json.old.k2j3h4g5.tmp",  # the temp of "pins.json.old"
                 ".other.bin.q1w2e3r4.tmp",  # another file's
                 "pins.json", ".pins.json.lock", "pins.json.tmp"]:  # no temp files
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / ".pins.json.folder1.tmp").mkdir()  # atomic_write makes no folders
    (tmp_path / ".pins.json.link1234.tmp").symlink_to(tmp_path / "pins.json")
    return tmp_path


def test_a_files_temp_files_are_those_atomic_write_names_for_it(folder: Path) -> None:
    assert [p.name for p in temp_files(folder, "pins.json")] == [
        ".pins.json.a1b2_c3d.tmp", ".pins.json.zz9yy8xx.tmp"]
    assert [p.name for p in temp_files(folder)] == [
        ".other.bin.q1w2e3r4.tmp", ".pins.json.a1b2_c3d.tmp", ".pins.json.old.k2j3h4g5.tmp",
        ".pins.json.zz9yy8xx.tmp"]
    assert temp_files(folder / "none", "pins.json") == []


def test_removing_a_files_temp_files_leaves_everything_else(folder: Path) -> None:
    before = set(folder.iterdir())
    removed = remove_temp_files(folder, "pins.json")
    assert sorted(p.name for p in removed) == [".pins.json.a1b2_c3d.tmp",
                                               ".pins.json.zz9yy8xx.tmp"]
    assert set(folder.iterdir()) == before - set(removed)
    assert {p.name for p in remove_temp_files(folder)} == {".other.bin.q1w2e3r4.tmp",
                                                          ".pins.json.old.k2j3h4g5.tmp"}


def test_the_temp_file_atomic_write_makes_is_one_temp_files_finds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name pattern is atomic_write's own: seen while it writes (before its rename)."""
    seen: list[list[Path]] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append(temp_files(tmp_path, "target.json"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "target.json", b"{}")
    assert len(seen) == 1 and len(seen[0]) == 1
    assert temp_files(tmp_path, "target.json") == []


@pytest.mark.skipif(sys.platform == "win32", reason="file modes are POSIX")
def test_an_atomic_create_makes_the_file_whole_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "new" / "api-token"
    atomic_create(path, b"secret\n", mode=0o640)  # not mkstemp's 0600: the mode is set
    assert path.read_bytes() == b"secret\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.stat().st_nlink == 1
    assert temp_files(path.parent) == []


def _no_hard_links(src: str, dst: str) -> None:
    raise PermissionError(errno.EPERM, "Operation not permitted")  # what vfat says


@pytest.mark.parametrize("links", ["hard links", "no hard links (FAT)"])
def test_an_atomic_create_of_a_file_that_exists_leaves_it_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: str) -> None:
    if links != "hard links":
        monkeypatch.setattr(os, "link", _no_hard_links)
    path = tmp_path / "api-token"
    atomic_create(path, b"first\n")
    assert path.read_bytes() == b"first\n"
    with pytest.raises(FileExistsError):
        atomic_create(path, b"second\n")
    assert path.read_bytes() == b"first\n"
    assert temp_files(tmp_path) == []

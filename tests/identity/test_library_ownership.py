"""``livecam identity`` deletes only what it made (issue 39, item 1): a library_dir set to a
user's folder, a symlinked ``photos`` folder, a user's folder dropped into a library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def cli(lib: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "identity", "--set",
                           f"identity.library_dir={lib}", *args], capture_output=True,
                          text=True, timeout=300)


def our_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return [ln for ln in result.stderr.splitlines() if ln.startswith("livecam")]


def user_folder(root: Path) -> set[tuple[str, bytes]]:
    """A user's folder with subfolders and files; returns what is in it."""
    for sub in ("Holiday 2024", "Work", "photos_old", "a" * 64):
        (root / sub).mkdir(parents=True)
        (root / sub / "img.txt").write_bytes(sub.encode())
    (root / "notes.txt").write_bytes(b"mine")
    return tree(root)


def tree(root: Path) -> set[tuple[str, bytes]]:
    return {(str(p.relative_to(root)), p.read_bytes() if p.is_file() else b"")
            for p in root.rglob("*")}


@pytest.mark.slow
def test_a_user_folder_as_library_is_refused_and_kept(tmp_path: Path,
                                                      photos: dict[str, Path]) -> None:
    # before: the add removed every subfolder of <library>/photos whose name no identity used
    pictures = tmp_path / "Pictures"
    before = user_folder(pictures)
    linked = tmp_path / "lib-with-link"
    linked.mkdir()
    (linked / "photos").symlink_to(pictures)  # a symlinked photos folder: never followed
    for lib in (pictures, linked, pictures / "Work"):
        result = cli(lib, "add", "alice", str(photos["good"]))
        lines = our_lines(result)
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert "livecam did not write" in lines[0] or "symlink" in lines[0], lines
        assert tree(pictures) == before
    assert sorted(p.name for p in linked.iterdir()) == ["photos"]  # nothing written there


@pytest.mark.slow
def test_a_photos_folder_symlinked_to_the_user_folder_is_kept(tmp_path: Path,
                                                              photos: dict[str, Path]) -> None:
    # before: identity add deleted all 4 of the user's folders through the link
    lib, pictures = tmp_path / "lib", tmp_path / "Pictures"
    assert cli(lib, "add", "alice", str(photos["good"])).returncode == 0
    before = user_folder(pictures)
    ours = lib / "photos"
    ours.rename(tmp_path / "moved")
    ours.symlink_to(pictures)
    result = cli(lib, "add", "bob", str(photos["good_jpg"]))
    assert result.returncode == 2 and len(our_lines(result)) == 1, result.stderr
    assert tree(pictures) == before


@pytest.mark.slow
def test_what_a_user_puts_in_a_library_survives_adds_and_removes(
        tmp_path: Path, photos: dict[str, Path]) -> None:
    lib = tmp_path / "lib"
    assert cli(lib, "add", "alice", str(photos["good"])).returncode == 0
    alice = {entry for entry in tree(lib / "photos")}
    before = user_folder(lib / "photos") - alice
    (lib / "photos" / "mine.txt").write_bytes(b"x")
    for args in (("add", "bob", str(photos["good_jpg"])), ("remove", "alice"),
                 ("remove", "bob")):
        assert cli(lib, *args).returncode == 0, args
    assert tree(lib / "photos") == before | {("mine.txt", b"x")}  # livecam's own are gone


def test_a_library_from_before_the_record_is_adopted(tmp_path: Path,
                                                     photos: dict[str, Path]) -> None:
    from livecam.identity import IdentityLibrary
    from livecam.identity.ownership import RECORD_NAME

    library = IdentityLibrary(tmp_path / "lib")
    library.add("alice", [photos["good"]])
    sha = library.get("alice").photos[0]["sha256"]
    (library.root / RECORD_NAME).unlink()  # as an older livecam left it
    orphan = library.root / "photos" / ("f" * 64)
    orphan.mkdir()
    (orphan / "texture.png").write_bytes(b"x")
    library.remove("alice")  # adopted: its own folders go, nothing else is there
    assert not (library.root / "photos" / sha).exists() and not orphan.exists()
    assert (library.root / RECORD_NAME).is_file()

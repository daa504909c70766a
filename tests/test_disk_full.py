"""A full disk while livecam writes (issue 39, item 5): one line that says what to do, no
traceback, and nothing half-written (no temp file, no partial record or entry).

Run through the CLI entry point, on a real full tmpfs (see :mod:`tests.disk_faults`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.identity import IdentityLibrary
from tests.disk_faults import full_folder


@pytest.fixture(scope="module")
def astronaut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from skimage import data

    path = tmp_path_factory.mktemp("photo") / "astronaut.png"
    image = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    cv2.imwrite(str(path), cv2.resize(image, None, fx=2, fy=2))
    return path


def livecam(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=300)


def one_disk_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    ours = [ln for ln in result.stderr.splitlines() if ln.startswith("livecam")]
    assert result.returncode == 1 and len(ours) == 1, result.stderr
    assert "the disk is full" in ours[0] and "free some space" in ours[0], ours
    return ours[0]


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp")]


def test_identity_add_on_a_full_disk_is_one_line(tmp_path: Path, astronaut: Path) -> None:
    # before: a traceback ending in OSError: [Errno 28] No space left on device
    with full_folder(tmp_path / "disk") as disk:
        lib = disk / "lib"
        line = one_disk_line(livecam("identity", "--set", f"identity.library_dir={lib}", "add",
                                     "astro", str(astronaut)))
        assert str(lib) in line  # names the file it could not write
        assert temp_files(disk) == []
        assert IdentityLibrary(lib).names() == []


def test_a_full_disk_keeps_the_library_as_it_was(tmp_path: Path, astronaut: Path) -> None:
    def make_library(disk: Path) -> None:
        IdentityLibrary(disk / "lib").add("alice", [astronaut])

    copy = tmp_path / "bob.png"
    image = cv2.imread(str(astronaut))
    image[0, 0] = (1, 2, 3)  # another photo (another sha256): bob needs new files
    cv2.imwrite(str(copy), image)
    with full_folder(tmp_path / "disk", size_kib=1024, prepare=make_library) as disk:
        lib = disk / "lib"
        one_disk_line(livecam("identity", "--set", f"identity.library_dir={lib}", "add", "bob",
                              str(copy)))
        library = IdentityLibrary(lib)
        assert library.names() == ["alice"] and len(library.load("alice").photos) == 1
        assert temp_files(disk) == []

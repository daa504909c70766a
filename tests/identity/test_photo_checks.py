"""The source-photo checks the README promises: one face, large enough for the swap.

Photos are built from real faces that ship in installed packages (skimage's astronaut, a person
from insightface's t1.jpg). The size limits follow scripts/bench_source_face_size.py (the
classic swap's identity holds down to 48 px source faces; detail falls below the live face's
width).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.analysis import geometry
from livecam.config.identity import IdentityConfig
from livecam.core.errors import IdentityError
from livecam.identity import IdentityLibrary

REPO = Path(__file__).resolve().parents[2]
ASTRONAUT_FACE_PX = 92.8  # cheek to cheek in skimage's 512x512 astronaut


def astronaut_with_face(width_px: float) -> np.ndarray:
    from skimage import data

    astronaut = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    scale = width_px / ASTRONAUT_FACE_PX
    return np.ascontiguousarray(cv2.resize(
        astronaut, None, fx=scale, fy=scale,
        interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC))


@pytest.fixture(scope="module")
def check_photos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import insightface.data

    from livecam.analysis.photo import analyze_photo

    folder = tmp_path_factory.mktemp("checks")
    # one clear face (186 px) and a stranger far behind (70 px): not ambiguous
    t1 = insightface.data.get_image("t1")
    xy = analyze_photo(t1).landmarks_xy[0, :468]
    centre, half = (xy.min(0) + xy.max(0)) / 2, float((xy.max(0) - xy.min(0)).max()) * 0.9
    crop = t1[int(centre[1] - half):int(centre[1] + half),
              int(centre[0] - half):int(centre[0] + half)]
    scale = 70 / geometry.face_width_px(xy)
    stranger = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    one_clear = astronaut_with_face(2 * ASTRONAUT_FACE_PX)
    h, w = stranger.shape[:2]
    one_clear[40:40 + h, one_clear.shape[1] - 40 - w:one_clear.shape[1] - 40] = stranger
    images = {"one_clear": one_clear, "face56": astronaut_with_face(56),
              "face40": astronaut_with_face(40)}
    paths = {}
    for name, image in images.items():
        paths[name] = folder / f"{name}.png"
        cv2.imwrite(str(paths[name]), image)
    return paths


def test_a_clear_face_with_a_small_one_behind_is_used_with_a_note(
        library: IdentityLibrary, check_photos: dict[str, Path]) -> None:
    result = library.add("me", [check_photos["one_clear"]])  # no --force needed
    assert any("2 faces found; using the largest" in w for w in result.warnings)
    assert library.get("me").photos[0]["face_width_px"] > 150


def test_a_56_px_face_transfers_identity_so_it_is_a_warning_not_a_refusal(
        library: IdentityLibrary, check_photos: dict[str, Path]) -> None:
    with pytest.raises(IdentityError, match=r"--force.*only 5\d px wide"):
        library.add("small", [check_photos["face56"]])
    result = library.add("small", [check_photos["face56"]], force=True)
    assert result.added_sha256


def test_a_40_px_face_is_refused_even_with_force(library: IdentityLibrary,
                                                  check_photos: dict[str, Path]) -> None:
    with pytest.raises(IdentityError, match="below the minimum of 48 px"):
        library.add("tiny", [check_photos["face40"]], force=True)


def test_readme_states_the_checks_the_code_makes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Identity photos"):]
    section = section[:section.index("\n#", 1)]
    config = IdentityConfig()
    assert re.search(rf"\b{config.min_face_px} px\b", section), "min_face_px not in README"
    assert re.search(rf"\b{config.warn_face_px} px\b", section), "warn_face_px not in README"
    assert "similar size" in section and "largest" in section  # several faces
    assert "--force" in section


def livecam_identity(lib: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "identity", "--set",
                           f"identity.library_dir={lib}", *args], capture_output=True,
                          text=True, timeout=120)


def test_removing_a_missing_identity_says_so_and_lists_names(
        library: IdentityLibrary, check_photos: dict[str, Path]) -> None:
    library.add("alice", [check_photos["one_clear"]])
    result = livecam_identity(library.root, "remove", "bob")
    assert result.returncode == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("livecam")]
    assert len(lines) == 1, result.stderr
    assert "no identity named 'bob'" in lines[0] and "known: alice" in lines[0]
    assert "add" not in lines[0]  # removing is no reason to add one
    assert library.names() == ["alice"]

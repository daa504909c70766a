"""``livecam identity``, run as a user runs it; the library lives in tmp_path (--set)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def livecam(lib: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", "identity", "--set",
                           f"identity.library_dir={lib}", *args], capture_output=True,
                          text=True, timeout=120)


def test_identity_commands_end_to_end(tmp_path: Path, photos: dict[str, Path]) -> None:
    lib = tmp_path / "lib"
    empty = livecam(lib, "list")
    assert empty.returncode == 0 and "no identities" in empty.stdout
    added = livecam(lib, "add", "alice", str(photos["good"]))
    assert added.returncode == 0, added.stderr
    assert "1 photo(s) added" in added.stdout
    listed = livecam(lib, "list", "--json")
    assert json.loads(listed.stdout)[0]["name"] == "alice"
    shown = livecam(lib, "show", "alice")
    assert "thumbnail:" in shown.stdout and str(photos["good"]) in shown.stdout
    removed = livecam(lib, "remove", "alice")
    assert removed.returncode == 0 and json.loads(livecam(lib, "list", "--json").stdout) == []


def test_bad_input_exits_2_with_one_line(tmp_path: Path, photos: dict[str, Path]) -> None:
    lib = tmp_path / "lib"
    for args, words in ((("add", "x", str(photos["corrupt"])), "not an image"),
                        (("add", "../x", str(photos["good"])), "path separator"),
                        (("add", "x", str(photos["grey"])), "--force"),
                        (("show", "nobody"), "no identity named")):
        result = livecam(lib, *args)
        assert result.returncode == 2, (args, result.stderr)
        # mediapipe's C++ side prints its own start-up lines to stderr; ours is one line
        lines = [ln for ln in result.stderr.splitlines() if ln.startswith("livecam")]
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr
    assert not (lib / "identities").exists() or not any((lib / "identities").iterdir())


def test_photos_of_different_people_are_refused_even_with_force(
        tmp_path: Path, photos: dict[str, Path]) -> None:
    """Issue 39 item 10: the astronaut and Tom Hanks (insightface's sample, enlarged) in one
    identity would switch person as the head turns: refused with one line naming the odd
    photo, --force or not; two photos of one person still go in."""
    import cv2
    import insightface.data

    tom = tmp_path / "tom.png"
    cv2.imwrite(str(tom), cv2.resize(insightface.data.get_image("Tom_Hanks_54745"), None,
                                     fx=4, fy=4, interpolation=cv2.INTER_CUBIC))
    lib = tmp_path / "lib"
    for extra in ((), ("--force",)):
        mixed = livecam(lib, "add", "astro", str(photos["good"]), str(tom), *extra)
        assert mixed.returncode != 0, mixed.stdout
        # (mediapipe's own TFLite start-up line is not livecam's)
        lines = [x for x in mixed.stderr.splitlines() if x.startswith("livecam")]
        assert len(lines) == 1 and str(tom) in lines[0] and "same person" in lines[0], lines
    assert json.loads(livecam(lib, "list", "--json").stdout) == []
    same = livecam(lib, "add", "astro", str(photos["good"]), str(photos["good_jpg"]))
    assert same.returncode == 0, same.stderr


def test_a_photo_of_another_person_added_later_is_refused(tmp_path: Path,
                                                          photos: dict[str, Path]) -> None:
    """Issue 39 item 10, one add after another: the identity's photos already in the library
    count, so `identity add astro tom.png` after `identity add astro astronaut.png` is refused
    like both photos in one add (before: the second add went in and the identity held two
    people), --force or not; another photo of the same person still joins."""
    import cv2
    import insightface.data

    tom = tmp_path / "tom.png"
    cv2.imwrite(str(tom), cv2.resize(insightface.data.get_image("Tom_Hanks_54745"), None,
                                     fx=4, fy=4, interpolation=cv2.INTER_CUBIC))
    lib = tmp_path / "lib"
    assert livecam(lib, "add", "astro", str(photos["good"])).returncode == 0
    mixed = livecam(lib, "add", "astro", str(tom), "--force")
    assert mixed.returncode == 2, mixed.stdout
    lines = [x for x in mixed.stderr.splitlines() if x.startswith("livecam")]
    assert len(lines) == 1 and str(tom) in lines[0] and "same person" in lines[0], lines
    [astro] = json.loads(livecam(lib, "list", "--json").stdout)
    assert astro["photos"] == 1, astro
    same = livecam(lib, "add", "astro", str(photos["good_jpg"]))
    assert same.returncode == 0, same.stderr
    assert json.loads(livecam(lib, "list", "--json").stdout)[0]["photos"] == 2

"""The docs name only what exists: every repository path (``livecam/…``, ``scripts/…``,
``tests/…``, ``docs/…``), every dotted module (``livecam.x.y``), every script run as a module
(``python -m scripts.x``) and every relative link in
README.md and docs/*.md points at a file or folder of this checkout. The diary in lab/ is
history and may name files since removed; it is not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: A path from the repository root, as prose and code spans write it.
PATH = re.compile(r"(?<![\w/.-])((?:livecam|scripts|tests|docs|engines|trackers|deploy|lab|\.ci)"
                  r"/[\w./@*-]*[\w/@])")
#: A dotted module path, maybe followed by one attribute (``livecam.app.build_app``).
MODULE = re.compile(r"(?<![\w./-])(livecam(?:\.\w+)+)")
#: A script run as a module (``python -m scripts.bench_gpu``).
SCRIPT = re.compile(r"-m (scripts(?:\.\w+)+)")
#: A markdown link's target, without its #fragment.
LINK = re.compile(r"\]\(([^)#\s]+)")


def missing_in(doc: Path) -> list[str]:
    """What ``doc`` names that does not exist, one entry per name."""
    text = doc.read_text(encoding="utf-8")
    missing: list[str] = []
    for name in PATH.findall(text):
        if "*" not in name and not (ROOT / name).exists():
            missing.append(f"path {name}")
    for target in LINK.findall(text):
        if not target.startswith(("http://", "https://", "mailto:")) \
                and not (doc.parent / target).exists():
            missing.append(f"link {target}")
    for dotted in SCRIPT.findall(text):
        if not ROOT.joinpath(*dotted.split(".")).with_suffix(".py").exists():
            missing.append(f"script {dotted}")
    for dotted in MODULE.findall(text):
        parts = dotted.split(".")
        found = next((i for i in range(len(parts), 1, -1)
                      if ROOT.joinpath(*parts[:i]).with_suffix(".py").exists()
                      or (ROOT.joinpath(*parts[:i]) / "__init__.py").exists()), 0)
        if found < len(parts) - 1:  # no module, or more than one name after it
            missing.append(f"module {dotted}")
    return missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = missing_in(doc)
    assert not missing, f"{doc.relative_to(ROOT)} names what does not exist: {missing}"


def test_a_missing_path_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("See livecam/nowhere.py, [x](../nope.md), livecam.nothing.here.at_all, "
                   "`python -m scripts.bench_nothing`, `python -m scripts.bench_gpu` and "
                   "livecam/app.py, livecam.app.build_app.", encoding="utf-8")
    assert missing_in(doc) == ["path livecam/nowhere.py", "link ../nope.md",
                               "script scripts.bench_nothing",
                               "module livecam.nothing.here.at_all"]


def test_the_architecture_page_answers_ten_where_do_i_change_questions() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where do I change", 1)[1].split("\n## ", 1)[0]
    answers = re.findall(r"^\d+\. \*\*", section, flags=re.MULTILINE)
    assert len(answers) >= 10
    for block in re.split(r"^\d+\. ", section, flags=re.MULTILINE)[1:]:
        assert "](../livecam/" in block or "](../engines/" in block, block


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_a_frame_size_example_sets_width_and_height_together(doc: Path) -> None:
    """Issue 39 item 20: the README's `--set capture.width=1920` alone gave 1920x720 frames
    (the camera keeps the default height): an example that sets one side sets the other."""
    for span in re.findall(r"`([^`]*)`", doc.read_text()):  # code spans, across lines
        example = " ".join(span.split())
        for section in ("capture", "output"):
            has_width = f"--set {section}.width=" in example
            has_height = f"--set {section}.height=" in example
            assert has_width == has_height, f"{doc.name}: {example}"

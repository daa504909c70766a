"""The product's text states contracts and reasons, not the story of how they were found.

A docstring, comment or message in ``livecam/`` that cites a device run ("H200 run 19"), an
issue ("issue 39 item 15"), a past session or the lab's diary (``lab/perf-notes.md``) sends a
newcomer to history they cannot read; the measured fact stays when it explains a choice, its
provenance goes. Current figures live in ``docs/performance.md``. A line break (and a comment's
``#``) inside such a reference is a space: "device runs\\n# 18" is found too.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_S = r"[\s#]+"  # between words: spaces, or a line break inside a docstring or comment block
#: What tells a run's or a session's story: a device run, an issue, a session, the diary.
LAB_REFERENCE = re.compile("|".join([
    rf"\b(?:device|H[12]00|GPU){_S}runs?{_S}\d+",  # "H200 run 19", "device runs 40-47"
    # a bare "run 45" / "runs 32-34" / "runs 66 and 89" cited in brackets or before a colon
    rf"\bruns?{_S}\d+(?:(?:{_S})?(?:-|–|and|,)(?:{_S})?\d+)?(?:{_S})?[):;,]",
    rf"\bissues?{_S}#?\d+",  # "issue 39 item 15", "issue 42's foreign colour"
    rf"\b(?:last|previous|earlier){_S}session\b|\bthis{_S}round\b",
    r"perf-notes",  # the lab's diary
]), flags=re.IGNORECASE)


def lab_references_in(paths: list[Path], root: Path = REPO) -> list[str]:
    """``file:line: reference`` for every lab reference in ``paths``."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in LAB_REFERENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(root)}:{line}: {' '.join(match.group().split())}")
    return found


def test_the_scan_finds_runs_issues_sessions_and_the_diary(tmp_path: Path) -> None:
    code = tmp_path / "m.py"
    code.write_text('"""Faster on the H200 (device run\n18). See lab/perf-notes.md."""\n'
                    "# launched late (run 45: 12 streams); merged (runs 66 and 89)\n"
                    'x = "refused (issue 39 item 15)"  # as in the last session\n'
                    "# a WHIP session's frames; it runs 30 frames; run(3, 4)\n",
                    encoding="utf-8")
    assert lab_references_in([code], tmp_path) == [
        "m.py:1: device run 18", "m.py:2: perf-notes", "m.py:3: run 45:",
        "m.py:3: runs 66 and 89)", "m.py:4: issue 39", "m.py:4: last session"]


def test_no_product_text_cites_a_run_an_issue_a_session_or_the_diary() -> None:
    found = lab_references_in(sorted((REPO / "livecam").rglob("*.py")))
    assert not found, (f"{len(found)} places cite the lab; state the contract and the reason "
                       "instead:\n" + "\n".join(found))

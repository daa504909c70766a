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


#: What tells the diary's story in a page of the product's docs: a run cited by number, a device
#: run, a round or a stop of a session, an issue, a date, "before the fix", the diary itself.
#: "the whole run 30.0 s" (a duration) is not a run number.
DIARY = re.compile("|".join([
    r"\bdevice\s+runs?\b",  # "device run" ("the GPU runs the swap" is a verb)
    r"\bruns?\s+\d+(?![\d.])",  # "run 47", "runs 48-67"
    r"\b(?:this|previous|last|next)\s+round\b",
    r"\bstop\s+\d+\b",  # "stop 12"
    r"\bissues?[\s-]#?\d+",  # "issue 41", "the issue-41 runs"
    r"\b20\d\d-[01]\d(?:-[0-3]\d)?\b",  # a date
    r"\bbefore\s+the\s+fix\b",
    r"perf-notes",  # the lab's diary: current figures are in docs/performance.md
]), flags=re.IGNORECASE)

#: The pages already written as current-state reference text; a page joins when it is cleaned.
REFERENCE_PAGES = ["README.md", "docs/architecture.md", "docs/config.md",
                   "docs/gpu-pipeline.md", "docs/enhance.md", "docs/triton.md",
                   "docs/control.md", "docs/identity-photos.md",
                   "docs/remote.md", "docs/fail-closed.md",
                   "docs/classic-swap.md", "docs/performance.md"]


def diary_in(path: Path) -> list[str]:
    """``line: text`` for every piece of the diary's story in the page at ``path``."""
    text = path.read_text(encoding="utf-8")
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {' '.join(m.group().split())}"
            for m in DIARY.finditer(text)]


def test_the_diary_scan_finds_runs_rounds_dates_and_the_diary(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("309 frames/s (run 67); runs 48-67 and device\nrun 11, 2026-11-30; "
                    "this round, the previous round, stop 12, the issue-41 runs, before the fix, "
                    "[notes](../lab/perf-notes.md).\nThe whole run 30.0 s; it runs on 4 tiles; "
                    "`livecam run --frames 300`; the GPU runs the swaps.\n", encoding="utf-8")
    assert diary_in(page) == [
        "1: run 67", "1: runs 48", "1: device run", "2: 2026-11-30", "2: this round",
        "2: previous round", "2: stop 12", "2: issue-41", "2: before the fix", "2: perf-notes"]


def test_reference_pages_state_the_present_not_the_diary() -> None:
    found = [f"{page}:{hit}" for page in REFERENCE_PAGES for hit in diary_in(REPO / page)]
    assert not found, (f"{len(found)} places tell the diary's story; state what is true now, "
                       "the current figure with its command (docs/performance.md), the reason "
                       "in the present tense:\n" + "\n".join(found))

"""No message, docstring, help text or doc tells a user an advanced key's old name.

An advanced key is written ``advanced.gpu.slots`` (:mod:`livecam.config.names`); its old name
``gpu.slots`` still works but warns, so text that shows it teaches a name that is going away;
so does a key merged into its twin (``names.MERGED``), with or without ``advanced.``.
This scans the text a user reads: every string and comment of ``livecam/`` (code such as
``config.gpu.slots`` and an f-string's ``{gpu.slots}`` are not text), its other text files
(the panel), ``docs/`` and the README. A line (in Markdown, a paragraph or list item) that
talks about the old names themselves says "old name" and is left alone.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from livecam.config.names import MERGED, is_streamer, schema_keys

REPO = Path(__file__).resolve().parents[2]

OLD_NAME = re.compile(r"(?<![\w.])(" + "|".join(
    [re.escape(key) for key in schema_keys() if "." in key and not is_streamer(key)]
    + [rf"(?:advanced\.)?{re.escape(key)}" for key in MERGED]) + r")(?![\w])")

_TEXT_SUFFIXES = (".md", ".html", ".js", ".css", ".txt", ".yaml")


def _without_fields(text: str) -> str:
    """An f-string token's text with its replacement fields (code) blanked out."""
    out: list[str] = []
    i, depth = 0, 0
    while i < len(text):
        pair = text[i:i + 2]
        if depth == 0 and pair in ("{{", "}}"):
            out.append("  ")
            i += 2
            continue
        char = text[i]
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            char = " "
        out.append(" " if depth else char)
        i += 1
    return "".join(out)


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of what a reader of ``path`` sees as words: a Python file's strings
    and comments, a Markdown file's paragraphs and list items, every line of another file."""
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".md":  # a paragraph or list item at a time
        start, unit = 1, []
        for number, line in enumerate([*source.splitlines(), ""], 1):
            if not line.strip() or line.lstrip().startswith(("- ", "| ", "#")):
                if unit:
                    yield start, " ".join(unit)
                start, unit = number, [line] if line.strip() else []
            else:
                unit.append(line)
        return
    if path.suffix != ".py":
        yield from enumerate(source.splitlines(), 1)
        return
    joined: list[tuple[int, str]] = []  # adjacent literals, "serve." "max_fps": one text
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NL, tokenize.COMMENT) and joined:
            pass
        elif tok.type != tokenize.STRING and joined:
            if len(joined) > 1:
                yield joined[0][0], "".join(body for _, body in joined)
            joined = []
        if tok.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        text = tok.string
        if tok.type == tokenize.STRING:
            prefix = text[:len(text) - len(text.lstrip("rRbBuUfF"))]
            if "f" in prefix.lower():
                text = _without_fields(text)
            quotes = 3 if text[len(prefix):len(prefix) + 3] in ('"""', "'''") else 1
            joined.append((tok.start[0], text[len(prefix) + quotes:len(text) - quotes]))
        for offset, line in enumerate(text.splitlines()):
            yield tok.start[0] + offset, line


def old_names_in(paths: list[Path], root: Path = REPO) -> list[str]:
    """``file:line: old name`` for every old name in the text of ``paths``."""
    found = []
    for path in paths:
        for number, line in text_lines(path):
            if "old name" in line.lower():
                continue
            found.extend(f"{path.relative_to(root)}:{number}: {m.group(1)}"
                         for m in OLD_NAME.finditer(line))
    return found


def _scanned() -> list[Path]:
    # names.py maps the old names to the new: naming them is its job
    package = [p for p in sorted((REPO / "livecam").rglob("*"))
               if p.is_file() and (p.suffix == ".py" or p.suffix in _TEXT_SUFFIXES)
               and p != REPO / "livecam" / "config" / "names.py"]
    return [*package, *sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]


def test_the_scan_finds_an_old_name_in_a_string_a_comment_and_a_doc(tmp_path: Path) -> None:
    code = tmp_path / "m.py"
    code.write_text('x = "set gpu.slots to 4"  # or swap.cover_cells\n'
                    'y = f"{gpu.slots} and {{gpu.slots}}"\nz = config.gpu.slots\n'
                    'w = "advanced.gpu.slots, capture.fps, advanced.gpu.precision"\n'
                    'v = ("set serve."\n     "max_fps")\n')
    doc = tmp_path / "d.md"
    doc.write_text("Set `engine.torch_mode: eager`,\nor `swap.hold_frames`.\n\n"
                   "- `advanced.gpu.slots`: its old name\n  `gpu.slots` still works.\n")
    assert old_names_in([code, doc], tmp_path) == [
        "m.py:1: gpu.slots", "m.py:1: swap.cover_cells", "m.py:2: gpu.slots",
        "m.py:4: advanced.gpu.precision", "m.py:5: serve.max_fps", "d.md:1: engine.torch_mode",
        "d.md:1: swap.hold_frames"]


def test_no_text_a_user_reads_shows_an_advanced_keys_old_name() -> None:
    found = old_names_in(_scanned())
    assert not found, f"{len(found)} old names (write advanced.KEY):\n" + "\n".join(found)

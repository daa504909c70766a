"""``livecam analyze --json OUT`` killed while it writes OUT, and the next analyze.

Before: the JSON is written through a temp file beside it (``.<name>.*.tmp``); an analyze
killed with kill -9 before the rename left that temp file in the user's folder for good. Now
an analyze holds the output's lock (as `livecam run` holds a ``file:`` output's) from its start
to its end, and the next analyze of the same file removes what a killed one left there; one
started while another writes the file is refused, so it never takes a live temp file for a
dead one's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.stopped_write import let_go, stopped, temp_files

_TEMP = ".faces.json.*.tmp"


def _analyze(out: Path) -> list[str]:
    return ["analyze", "--input", "synthetic:160x120", "--frames", "1", "--json", str(out)]


def _in_process(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from livecam.cli import main

    with pytest.raises(SystemExit) as exc:
        main(_analyze(out))
    return int(exc.value.code or 0), capsys.readouterr().err


def test_the_next_analyze_removes_the_temp_file_of_one_killed_mid_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "faces.json"
    with stopped(_TEMP, *_analyze(out)) as (_, tmp):
        pass  # killed with its JSON in the temp file, not yet renamed
    assert tmp.parent == tmp_path and temp_files(tmp_path) == [tmp.name]
    code, err = _in_process(out, capsys)
    assert code == 0, err
    assert temp_files(tmp_path) == []
    assert len(json.loads(out.read_text())["frames"]) == 1


def test_an_analyze_of_a_file_another_one_writes_is_refused_and_keeps_its_temp_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "faces.json"
    with stopped(_TEMP, *_analyze(out)) as (proc, tmp):
        code, err = _in_process(out, capsys)
        assert code == 1, err
        # before: "stop that one first, or pick another with --input / --output / --set
        # output.device=...", none of which is analyze's --json
        assert (f"another livecam (pid {proc.pid}) is writing {out}: wait for it to finish, "
                "or choose another --json path") in err, err
        assert "--output" not in err and "output.device" not in err, err
        assert tmp.is_file(), "the second analyze removed the temp file a live one writes"
        code, _, err = let_go(proc)
        assert code == 0, err
    assert temp_files(tmp_path) == []
    assert len(json.loads(out.read_text())["frames"]) == 1

"""The scripts run from the checkout's root as modules (``python -m scripts.NAME``), as the docs
write them: no script sets up ``sys.path`` for itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: A script changing the import path for itself (or for a child it writes).
PATH_SETUP = re.compile(r"sys\.path\s*(\.insert|\.append|\[[^\]]*\]\s*=|\s*\+?=)")


def test_no_script_sets_up_the_import_path() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted(ROOT.glob("scripts/**/*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if PATH_SETUP.search(line)]
    assert not found, f"scripts that change sys.path: {found}"


def test_the_path_check_finds_a_path_set_up() -> None:
    assert PATH_SETUP.search("sys.path.insert(0, str(ROOT))")
    assert PATH_SETUP.search("sys.path[:0] = [root]")
    assert not PATH_SETUP.search('env={"PYTHONPATH": os.pathsep.join(sys.path)}')


@pytest.mark.parametrize(
    "script", ["bench_streams", "bench_gpu", "bench_triton", "bench_sigterm", "soak"])
def test_a_script_importing_other_scripts_and_helpers_runs_as_a_module(script: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", f"scripts.{script}", "--help"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout

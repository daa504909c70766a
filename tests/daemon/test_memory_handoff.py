"""The daemon's exit leaves the unmapping of its memory to a helper (issue 39 item 15: the
kernel's ``exit_mmap`` of ~290 MB was the longest part of a SIGTERM on a saturated machine).

A real process with 300 MB of touched memory, a held file lock and an open file ends through
``exit_without_teardown``; a parent made subreaper (so the helper becomes its child) checks that
the exit code is kept, that the lock is free the moment the process is reaped, that the helper
holds the memory but none of the process's files, and that it ends by itself. The parent is its
own process, so the test session never becomes a subreaper."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.subreaper import REPORT_HELPERS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="clone(CLONE_VM) is Linux's")

EXITING = """
import fcntl, sys, threading
import numpy as np
memory = np.ones(300 * 2**20 // 8)  # touched: resident
lock = open(sys.argv[1], "w")
fcntl.flock(lock, fcntl.LOCK_EX)
kept = open(sys.argv[2], "w")
threading.Thread(target=threading.Event().wait, daemon=True).start()  # a thread still running
print("ready", flush=True)
from livecam.daemon.service import exit_without_teardown
exit_without_teardown(7)
"""

PARENT = """
import ctypes, fcntl, json, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans become ours
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]],
                         stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "ready\\n"
code = child.wait()
with open(sys.argv[2], "w") as lock:  # free at once: a restarted daemon gets its locks
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
""" + REPORT_HELPERS


def test_the_exit_hands_its_memory_to_a_helper_that_holds_no_file(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", PARENT, EXITING, str(tmp_path / "lock"),
                             str(tmp_path / "recording")], capture_output=True, text=True,
                            timeout=120, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["code"] == 7
    [helper] = report["helpers"]
    assert helper["rss_mb"] > 250  # the memory is the helper's to unmap
    assert helper["files"] == ["/dev/null"]  # not the lock, not the recording, no pipe

"""A livecam process stopped in the middle of an atomic write, for the kill -9 tests.

Run as a script (``python -m tests.core.stopped_write GLOB ARG...``) it is ``livecam ARG...``
(or, with ``-c CODE ARG...``, that Python code with ``argv`` = the ARGs) that stops when
:func:`~livecam.core.files.atomic_write` is about to rename a temp file whose name matches
GLOB over its target: the temp file is then whole and on disk, and nothing has removed it. It
says ``stopped <temp path>`` on stdout and blocks until it is killed (the kill -9 tests) or its
stdin is closed (then it goes on). The seam is Python's audit hook on ``os.rename`` (PEP 578,
raised by ``os.replace`` too): the real code path runs, nothing of livecam is patched, and the
stop is at a known point however loaded the host is.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120.0


def _env() -> dict[str, str]:
    """The repository first on the child's path, so that it runs this checkout's code under a
    plain `pytest` (importlib mode) too, not an installed copy."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@contextmanager
def stopped(glob: str, *args: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """(the process, its temp file) of this module run with ``glob`` and ``args``, stopped
    before the rename; killed on leaving (SIGKILL on POSIX, TerminateProcess on Windows: no
    cleanup runs) unless the caller let it go on (:func:`let_go`)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.core.stopped_write", glob, *args],
                            cwd=REPO, env=_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # ends when the process does
            if line.startswith("stopped "):
                break
            lines.append(line)
        else:
            proc.kill()
            raise AssertionError(("it never stopped", lines, proc.communicate(timeout=WAIT_S)))
        yield proc, Path(line.removeprefix("stopped ").rstrip("\n"))
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=WAIT_S)


def let_go(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Let a :func:`stopped` process go on (its stdin closes) and wait for its end: (exit
    status, stdout, stderr)."""
    out, err = proc.communicate(input="", timeout=WAIT_S)
    return proc.returncode, out, err


def temp_files(folder: Path) -> list[str]:
    """The names of the atomic-write temp files anywhere under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


def main(argv: list[str]) -> None:
    glob, *rest = argv
    stopping = [False]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event != "os.rename" or stopping[0] or not isinstance(args[0], str | os.PathLike):
            return
        src = os.fspath(args[0])
        if isinstance(src, str) and fnmatch.fnmatch(os.path.basename(src), glob):
            stopping[0] = True  # once: what it does below raises no rename
            print(f"stopped {src}", flush=True)
            sys.stdin.read()  # until killed, or until the test closes stdin

    sys.addaudithook(hook)
    if rest[:1] == ["-c"]:
        exec(rest[1], {"__name__": "__stopped__", "argv": rest[2:]})
        return
    from livecam.cli import main as livecam

    livecam(rest)


if __name__ == "__main__":
    main(sys.argv[1:])

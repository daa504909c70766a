"""A livecam process stopped in the middle of an atomic write, for the kill -9 tests.

Run as a script (``python -m tests.core.stopped_write [--at POINT] GLOB ARG...``) it is
``livecam ARG...`` (or, with ``-c CODE ARG...``, that Python code with ``argv`` = the ARGs)
that stops at POINT on a file whose name matches GLOB:

* ``os.rename`` (the default): when :func:`~livecam.core.files.atomic_write` is about to
  rename its temp file over its target: the temp file is then whole and on disk, and nothing
  has removed it (raised by ``os.replace`` too);
* another audit event whose first argument is a path, such as ``os.link`` or ``os.remove``:
  just before that call on the file;
* ``created``: after an open that may create the file (``O_CREAT``), at the next open of a
  file descriptor (``os.fdopen``, before the first write): the file is there and empty.

It says ``stopped <path>`` on stdout and blocks until it is killed (the kill -9 tests) or its
stdin is closed (then it goes on). The seam is Python's audit hooks (PEP 578): the real code
path runs, nothing of livecam is patched, and the stop is at a known point however loaded the
host is.
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


def child_env() -> dict[str, str]:
    """The repository first on the child's path, so that it runs this checkout's code under a
    plain `pytest` (importlib mode) too, not an installed copy."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@contextmanager
def stopped(glob: str, *args: str, at: str = "os.rename"
            ) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """(the process, the file it stopped on) of this module run with ``glob`` and ``args``,
    stopped at ``at`` (see the module's docstring); killed on leaving (SIGKILL on POSIX,
    TerminateProcess on Windows: no cleanup runs) unless the caller let it go on
    (:func:`let_go`)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.core.stopped_write", "--at", at,
                             glob, *args],
                            cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
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


def _named(file: object, glob: str) -> str | None:
    """``file`` as a str path when it is one whose name matches ``glob``, else None."""
    if not isinstance(file, str | os.PathLike):
        return None
    path = os.fspath(file)
    return path if isinstance(path, str) and fnmatch.fnmatch(os.path.basename(path),
                                                             glob) else None


def main(argv: list[str]) -> None:
    at = "os.rename"
    if argv[:1] == ["--at"]:
        at, argv = argv[1], argv[2:]
    glob, *rest = argv
    stopping = [False]
    created: list[str] = []  # for "created": the last file matching glob that os.open made

    def stop(path: str) -> None:
        stopping[0] = True  # once: what it does below raises no more events of interest
        print(f"stopped {path}", flush=True)
        sys.stdin.read()  # until killed, or until the test closes stdin

    def hook(event: str, args: tuple[object, ...]) -> None:
        if stopping[0]:
            return
        if at != "created":
            path = _named(args[0], glob) if event == at and args else None
            if path is not None:
                stop(path)
            return
        if event != "open":  # (file, mode, flags): os.open's mode is None, io.open's a str
            return
        if isinstance(args[0], int):
            if created:
                stop(created[-1])
            return
        path = _named(args[0], glob)
        if path is not None and isinstance(args[2], int) and args[2] & os.O_CREAT:
            created.append(path)

    sys.addaudithook(hook)
    if rest[:1] == ["-c"]:
        exec(rest[1], {"__name__": "__stopped__", "argv": rest[2:]})
        return
    from livecam.cli import main as livecam

    livecam(rest)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Peak memory of one `livecam` command, measured from outside, for benchmarks and tests.

The figure is the command's own ``VmHWM`` (``/proc/self/status``, written by an ``atexit``
hook), not ``wait4``'s ``ru_maxrss``: Linux carries a parent's resident size across
``fork``/``exec`` into the child's ``ru_maxrss``, so a test runner holding 400 MB would read
400 MB for every command it starts. Linux only (None elsewhere).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

_WRAPPER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def _say():
    with open("/proc/self/status") as fh, open(out, "w") as to:
        to.write(fh.read())
atexit.register(_say)
sys.argv[0] = "livecam"
runpy.run_module("livecam.cli", run_name="__main__")
"""


def peak_rss_mb(args: list[str], *, timeout_s: float = 600, env: dict[str, str] | None = None
                ) -> tuple[float | None, int, str]:
    """(peak RSS in MB or None, exit status, stderr) of ``livecam ARGS`` in a subprocess.

    ``env``: its environment, e.g. a ``PYTHONPATH`` naming another checkout; the command then
    runs in a temp folder, as ``python -c`` puts the working directory (a checkout, here)
    before ``PYTHONPATH`` on ``sys.path``. Give absolute paths in ``args``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        status_path = Path(tmp) / "status"
        done = subprocess.run([sys.executable, "-c", _WRAPPER, str(status_path), *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=timeout_s, env=env, cwd=None if env is None else tmp)
        peak = None
        if status_path.is_file():
            for line in status_path.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024  # kB
        return peak, done.returncode, done.stderr

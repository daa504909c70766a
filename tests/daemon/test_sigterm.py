"""SIGTERM while the daemon is busy: a real face swapped into a `file:` recording, many idle
connections to the control API, identities and bypass switched every 0.1 s through it.

The daemon must exit 0, say why it stopped, and leave a recording that decodes to the end
with every frame it had sent. How fast it exits is measured by ``scripts/bench_sigterm.py``
(a timed assert here would fail on a loaded machine for the wrong reason).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.daemon.conftest import Daemon, add_identities
from tests.helpers.sockets import idle_sockets

pytestmark = pytest.mark.slow


def test_sigterm_under_load_exits_0_with_a_whole_recording(
        new_daemon: Callable[[], Daemon], face_clip: Path, astronaut_bgr: np.ndarray) -> None:
    import av

    d = new_daemon()
    names = add_identities(d, astronaut_bgr)
    out = d.root / "rec.mp4"
    d.start("--input", f"file:{face_clip}", "--output", f"file:{out}", "--identity", names[0],
            record=False)
    d.wait_ready(min_frames=30)
    with idle_sockets(d.port, 300):
        code, sent = _sigterm_while_switching(d, names)
    err = d.stderr()
    assert code == 0, err[-3000:]
    records = [json.loads(line) for line in err.splitlines()]
    assert any(r["msg"].startswith("stopped (SIGTERM)") for r in records)
    timings = next(r["timings_ms"] for r in records if r["msg"].startswith("stop timings"))
    assert {"controls", "capture", "pipeline", "output", "close", "total"} <= timings.keys()
    # the recording is complete: it decodes to the end and holds every frame sent before
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(frames) >= sent
    assert frames[-1].shape == (360, 480, 3) and frames[-1].std() > 10  # a picture, not black


def _sigterm_while_switching(d: Daemon, names: list[str]) -> tuple[int, int]:
    """Switch identities and bypass through the API every 0.1 s and send SIGTERM meanwhile;
    (exit code, frames sent before the signal)."""
    stop = threading.Event()
    switched = threading.Event()

    def switch() -> None:
        k = 0
        while not stop.is_set():
            with contextlib.suppress(OSError):  # refused once the daemon is stopping
                if k % 3 == 2:
                    d.api_post("/api/bypass", {"on": k % 2 == 0})
                else:
                    d.api_post("/api/select", {"name": names[k % len(names)]})
                switched.set()
            k += 1
            stop.wait(0.1)

    thread = threading.Thread(target=switch, daemon=True)
    thread.start()
    try:
        assert switched.wait(60)
        sent = int(d.status()["frames"]["sent"])
        assert d.proc is not None
        d.proc.send_signal(signal.SIGTERM)
        return d.proc.wait(60), sent
    finally:
        stop.set()
        thread.join(30)

"""A `file:` recording survives the process dying mid-write (kill -9, the OOM killer, a power
cut): what was written up to the last couple of seconds stays playable."""

from __future__ import annotations

import signal
from collections.abc import Callable

import av
import pytest

from tests.daemon.conftest import Daemon

pytestmark = pytest.mark.slow


def test_a_recording_survives_kill_9(new_daemon: Callable[[], Daemon]) -> None:
    """An MP4 keeps its index at the end: killed before close, 6 s of recording was a 48-byte
    file that no player opens. Written in fragments a keyframe apart (2 s), all but the last
    fragment and what the encoder still held is kept."""
    d = new_daemon()
    out = d.root / "rec.mp4"
    d.start("--input", "synthetic:160x120", "--output", f"file:{out}", record=False)
    sent = d.wait_ready(min_frames=180)["frames"]["sent"]  # 6 s at 30 fps
    assert d.proc is not None
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(30)
    kept = 0
    with av.open(str(out)) as container:
        try:
            for _ in container.decode(video=0):
                kept += 1
        except av.error.InvalidDataError:  # the fragment cut short: a player stops there too
            pass
    # lost at most: the fragment being written (a 2 s GOP) and the encoder's look-ahead
    assert kept >= sent - 60 - 40, (kept, sent)

"""Idle sockets flooding the control API (issue 39 item 13): 3,000 local sockets that never
send a byte held every connection slot for the idle timeout each, and `livecam ctl` queued
behind them timed out (4-7 of 5-7 tries failed). Now they wait in a lobby in front of the
HTTP layer until they send a byte (livecam/control/http.py), so authenticated control keeps
working and the output keeps sending. The output's gaps under the flood are
scripts/bench_idle_flood.py's figures (docs/control.md); here the output is judged by its
frame count, which must grow between two `ctl` answers."""

from __future__ import annotations

import json
import resource
from collections.abc import Callable

import pytest

from tests.daemon.conftest import Daemon
from tests.helpers.sockets import idle_sockets

pytestmark = pytest.mark.slow

SOCKETS = 3000


def test_ctl_answers_through_3000_idle_sockets(new_daemon: Callable[[], Daemon]) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = SOCKETS + 500
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"needs {need} file descriptors, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    try:
        d = new_daemon()
        d.start("--input", "synthetic:160x120", "--output", "null", record=False)
        d.wait_ready(min_frames=5)
        sent = []
        with idle_sockets(d.port, SOCKETS):
            for _ in range(3):  # each within ctl's own 5 s deadline
                result = d.ctl("--json", "status", check=False)
                assert result.returncode == 0, result.stderr
                sent.append(json.loads(result.stdout)["frames"]["sent"])
        assert sent == sorted(set(sent)), f"the output stopped sending: {sent}"
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

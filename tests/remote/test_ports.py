"""How the remote tests get their ports (:mod:`tests.helpers.whip_session`): a port picked free
and bound later by another process can be taken in between (parallel CI; any outgoing
connection takes an ephemeral port). The race is made certain here by holding the port the
old way would have picked: the server must start anyway, on the port the kernel gave it (read
back from its log), and a restartable server retries past a taken port, below the ephemeral
range. Real `livecam serve` subprocesses (no library: frames would pass through)."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import whip_session
from tests.helpers.whip_session import ephemeral_range, logged_url, restartable_port, start_serve


@pytest.fixture
def held() -> Iterator[int]:
    """A port this test holds bound (and listening): taken for everyone else."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        yield int(s.getsockname()[1])


def _answers(url: str) -> int:
    """The HTTP status of a POST without a token (the WHIP endpoint's 401)."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST"), timeout=30)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def test_a_server_binds_the_port_the_kernel_gives_it_even_when_a_picked_one_is_taken(
        tmp_path: Path, held: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(whip_session, "free_port", lambda: held)  # picked, then taken
    server = start_serve(tmp_path, max_sessions=1, identity=None, users=("alice",))
    try:
        assert server.port != held and server.url.endswith(f":{server.port}/whip")
        assert _answers(server.url) == 401
        assert server.ctl("--json", "status").returncode == 0  # its control API, read back
    finally:
        server.stop()


@pytest.mark.slow  # two server starts: 4-10 s on the loaded host
def test_a_restartable_server_retries_past_a_taken_port(
        tmp_path: Path, held: int, monkeypatch: pytest.MonkeyPatch) -> None:
    picks = iter([held, restartable_port()])
    monkeypatch.setattr(whip_session, "restartable_port", lambda: next(picks))
    server = start_serve(tmp_path, max_sessions=1, identity=None, users=("alice",),
                         restartable=True)
    try:
        assert server.port != held and _answers(server.url) == 401
    finally:
        server.stop()
    again = start_serve(tmp_path, max_sessions=1, identity=None, prepared=True,
                        users=("alice",), port=server.port)
    try:
        assert again.url == server.url and _answers(again.url) == 401
    finally:
        again.stop()


def test_restartable_ports_are_below_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    assert 1024 < low < high
    ports = {restartable_port() for _ in range(20)}
    assert all(low - 10_000 <= p < low for p in ports) and len(ports) > 1


def test_logged_url_reads_the_bound_address_and_kills_a_silent_process(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("INFO control API on http://127.0.0.1:40123 (panel: http://127.0.0.1:40123"
                   "/panel?token=...)\nINFO WHIP endpoint on https://[::1]:5/whip (1 user(s))\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert logged_url(log, "control API on", sleeper) == "http://127.0.0.1:40123"
        assert logged_url(log, "WHIP endpoint on", sleeper) == "https://[::1]:5"
        with pytest.raises(AssertionError, match="nothing here"):
            logged_url(log, "nothing here", sleeper, timeout_s=0.5)
        assert sleeper.wait(30) != 0  # killed: a test never leaves it running
    finally:
        if sleeper.poll() is None:
            sleeper.kill()

"""``livecam ctl`` when another program holds livecam's port: while livecam is not running, any
local user can listen on 127.0.0.1:PORT. Whatever that program answers, ctl must send it
neither the token nor anything it could act with (a request signature), and say so in one line.

Before the fix, ctl's first request carried ``Authorization: Bearer TOKEN``: each of these tests
found the token in the bytes the impostor received."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from tests.subcommands.conftest import TOKEN, RawServer, ctl, http_answer

_STATUS = {"active_identity": None, "bypass": False, "fps_in": 30.0, "fps_out": 30.0,
           "latency_ms": {"p50": 1.0, "p99": 2.0}, "tracks": [], "identities": ["alice"],
           "backend": "cpu", "output": "null", "width": 640, "height": 360, "fps": 30.0,
           "frames": {"sent": 10}}
_COMMAND = {"applied": True, "state": {"active_identity": "alice", "bypass": False}}

#: What the program on the port answers to every request.
IMPOSTORS = {
    # a program that copies livecam's replies, but cannot prove it holds the token
    "wrong proof": http_answer(200, json.dumps(
        {"proof": "0" * 64, "nonce": "1" * 32, **_STATUS, **_COMMAND}).encode()),
    # another user's livecam of the version before the proof, or a program that mimics it
    "old livecam": http_answer(401, b'{"error": "missing or wrong token: use `livecam ctl`"}'),
    "web page": http_answer(200, b"<html>hello</html>", "text/html"),
    "livecam replies": http_answer(200, json.dumps({**_STATUS, **_COMMAND}).encode()),
}

ACTIONS = [["status"], ["identities"], ["metrics"], ["next"], ["select", "alice"],
           ["bypass", "on"], ["reload"]]


@pytest.mark.parametrize("action", ACTIONS, ids=" ".join)
@pytest.mark.parametrize("impostor", IMPOSTORS)
def test_the_token_never_reaches_a_program_that_does_not_hold_it(
        capsys: pytest.CaptureFixture[str], token_file: Path, impostor: str,
        action: list[str]) -> None:
    def answer(conn: socket.socket, request: bytes, stop: threading.Event) -> None:
        conn.sendall(IMPOSTORS[impostor])

    with RawServer(answer) as server:
        code, output = ctl(capsys, token_file, "--url", server.url, *action)
    received = bytes(server.received)
    assert received, "ctl sent nothing: the test would prove nothing"
    assert TOKEN.encode() not in received, received
    # nor a signature: no credential of any kind went to the impostor
    assert b"authorization:" not in received.lower(), received
    assert code == 1, output
    assert output.startswith("livecam: error: ") and output.count("\n") == 1, output
    if impostor == "wrong proof":
        port = server.url.rpartition(":")[2]
        assert (f"the program on 127.0.0.1:{port} does not hold livecam's control token: it "
                "is not this user's livecam (token not sent)") in output, output
    elif impostor == "old livecam":
        assert "did not prove it holds livecam's control token" in output, output
        assert "token not sent" in output, output

"""``livecam ctl`` against a server that answers a byte at a time: each exchange (connect, send,
the answer's headers and body) has one deadline, so ctl ends soon after it with one line.

Before the fix the 5 s timeout applied to each read, so a byte a second held ctl as long as the
server liked: these tests waited the whole 30 s for it."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from livecam.control.handshake import new_nonce, server_proof
from tests.subcommands.conftest import TOKEN, RawServer, ctl, http_answer

#: How long the server would trickle: far past ctl's 5 s deadline and the bound below.
_TRICKLE_S = 120.0
#: ctl must end well within this (its deadline is 5 s; the host may run 40 % slow).
_BOUND_S = 30.0


def _trickle(conn: socket.socket, head: bytes, stop: threading.Event) -> None:
    """Send ``head`` then one byte a second, for :data:`_TRICKLE_S` or until ``stop``."""
    conn.sendall(head)
    for _ in range(int(_TRICKLE_S)):
        if stop.wait(1.0):
            return
        conn.sendall(b"a")


def _proof(request: bytes) -> bytes | None:
    """A true proof if ``request`` is ctl's challenge, so that ctl goes on to its request."""
    target = request.split(b" ", 2)[1].decode()
    if not target.startswith("/api/challenge"):
        return None
    nonce = target.partition("nonce=")[2]
    return http_answer(200, json.dumps({"proof": server_proof(TOKEN, nonce),
                                        "nonce": new_nonce()}).encode())


TRICKLES = {
    # the status line, then a header that never ends
    "headers": b"HTTP/1.1 200 OK\r\nX-Padding: ",
    # whole headers, then a body far shorter than its Content-Length
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000"
            b"\r\n\r\n",
}


@pytest.mark.slow
# the challenge is trickled to a status, the signed request to a command: each exchange of
# ctl's two kinds (a read, and a command whose deadline adds advanced.control.apply_wait_s) is
# covered
@pytest.mark.parametrize(("proves", "action"), [(False, "status"), (True, "next")],
                         ids=["challenge trickled", "request trickled"])
@pytest.mark.parametrize("where", TRICKLES)
def test_a_trickling_server_cannot_hold_ctl_past_its_deadline(
        capsys: pytest.CaptureFixture[str], token_file: Path, where: str, proves: bool,
        action: str) -> None:
    def answer(conn: socket.socket, request: bytes, stop: threading.Event) -> None:
        proof = _proof(request) if proves else None
        if proof is not None:  # it holds the token: ctl sends its request, which it trickles
            conn.sendall(proof)
        else:
            _trickle(conn, TRICKLES[where], stop)

    result: list[tuple[int, str]] = []
    ended = threading.Event()
    with RawServer(answer) as server:
        def run() -> None:
            try:
                result.append(ctl(capsys, token_file, "--url", server.url, action))
            finally:
                ended.set()

        threading.Thread(target=run, daemon=True).start()
        in_time = ended.wait(_BOUND_S)
        server.stop.set()  # ends the trickle, so a ctl that waits for it ends too
        ended.wait(30)
    assert in_time, f"ctl was still waiting {_BOUND_S:g} s into a {_TRICKLE_S:g} s trickle"
    code, output = result[0]
    assert code == 1, output
    assert output.startswith("livecam: error: ") and output.count("\n") == 1, output
    assert "within 5 s" in output, output

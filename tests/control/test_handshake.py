"""The challenge and signed requests of :mod:`livecam.control.handshake`: the nonce store on its
own, then against a real running app: the server proves it holds the token to anyone who asks,
and a signed request is accepted once, for exactly the method, path, query and body signed."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from livecam.control import handshake
from livecam.control.handshake import ServerNonces
from tests.control.conftest import Running


class _Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_server_nonce_is_good_once() -> None:
    nonces = ServerNonces()
    nonce = nonces.issue()
    assert handshake.is_nonce(nonce)
    assert nonces.take(nonce)
    assert not nonces.take(nonce)
    assert not nonces.take(handshake.new_nonce())  # never issued


def test_a_server_nonce_expires() -> None:
    clock = _Clock()
    nonces = ServerNonces(ttl_s=30.0, clock=clock)
    kept, late = nonces.issue(), nonces.issue()
    clock.now_s += 29.0
    assert nonces.take(kept)
    clock.now_s += 1.0
    assert not nonces.take(late)


def test_the_oldest_nonces_go_when_too_many_are_out() -> None:
    nonces = ServerNonces(most=3)
    issued = [nonces.issue() for _ in range(5)]
    assert [nonces.take(n) for n in issued] == [False, False, True, True, True]


@pytest.mark.parametrize("text", ["", "0" * 31, "0" * 33, "A" * 32, "g" * 32, None, 7])
def test_only_nonces_as_made_are_nonces(text: Any) -> None:
    assert not handshake.is_nonce(text)


def test_a_proof_never_passes_as_a_request_signature() -> None:
    # the server proves to anyone: what it signs must not sign a request
    nonce = handshake.new_nonce()
    proof = handshake.server_proof("tok", nonce)
    assert handshake.proof_matches("tok", nonce, proof)
    assert not handshake.proof_matches("other", nonce, proof)
    assert not handshake.mac_matches("tok", nonce, "GET", "/", b"", proof)


def _send(r: Running, method: str, target: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, Any]:
    host, port = r.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def _server_nonce(r: Running) -> str:
    client_nonce = handshake.new_nonce()
    status, answer = _send(r, "GET", f"/api/challenge?nonce={client_nonce}")
    assert status == 200, answer
    assert handshake.proof_matches(r.token, client_nonce, answer["proof"])
    return str(answer["nonce"])


def _signed(r: Running, method: str, target: str, body: bytes = b"", *,
            signed_as: tuple[str, str, bytes] | None = None,
            nonce: str | None = None) -> tuple[int, Any]:
    """Send ``method target body``, signed for ``signed_as`` (what was signed, if not that)."""
    nonce = nonce or _server_nonce(r)
    what = signed_as or (method, target, body)
    auth = handshake.signed_authorization(r.token, nonce, *what)
    return _send(r, method, target, body or None, {"Authorization": auth})


def test_the_challenge_needs_no_token_and_checks_its_nonce(running: Running) -> None:
    _server_nonce(running)  # proves, without any token sent
    status, answer = _send(running, "GET", "/api/challenge?nonce=xyz")
    assert status == 400 and "nonce" in answer["error"]
    status, _ = _send(running, "GET", "/api/challenge")
    assert status == 400


def test_signed_requests_are_served(running: Running) -> None:
    status, doc = _signed(running, "GET", "/api/status")
    assert status == 200 and "active_identity" in doc
    status, reply = _signed(running, "POST", "/api/select", b'{"name": "bob"}')
    assert status == 200 and reply["state"]["active_identity"] == "bob"
    status, doc = _signed(running, "GET", "/api/status?stream=0")
    assert status == 200 and doc["active_identity"] == "bob"


def test_a_replayed_or_altered_request_is_refused(running: Running) -> None:
    nonce = _server_nonce(running)
    assert _signed(running, "POST", "/api/bypass", b'{"on": false}', nonce=nonce)[0] == 200
    before = running.app.state
    refused = [
        # the same request again: its nonce is spent
        _signed(running, "POST", "/api/bypass", b'{"on": false}', nonce=nonce),
        # a nonce the server never gave
        _signed(running, "POST", "/api/bypass", b'{"on": true}',
                nonce=handshake.new_nonce()),
        # signed for one body, path, query or method, sent with another
        _signed(running, "POST", "/api/bypass", b'{"on": true}',
                signed_as=("POST", "/api/bypass", b'{"on": false}')),
        _signed(running, "POST", "/api/bypass", b'{"on": true}',
                signed_as=("POST", "/api/select", b'{"on": true}')),
        _signed(running, "POST", "/api/bypass?stream=0", b'{"on": true}',
                signed_as=("POST", "/api/bypass", b'{"on": true}')),
        _signed(running, "POST", "/api/quit", b"", signed_as=("GET", "/api/quit", b"")),
    ]
    assert [status for status, _ in refused] == [401] * len(refused), refused
    assert all("signed request refused" in answer["error"] for _, answer in refused)
    running.commands_applied()  # anything wrongly queued has been applied by now
    assert running.app.state == before and not running.app.done


def test_a_wrong_signature_spends_the_nonce(running: Running) -> None:
    nonce = _server_nonce(running)
    status, _ = _signed(running, "GET", "/api/status", nonce=nonce,
                        signed_as=("GET", "/api/identities", b""))
    assert status == 401
    # trying again with the right signature: the nonce is gone, so no guessing per nonce
    assert _signed(running, "GET", "/api/status", nonce=nonce)[0] == 401


def test_the_challenge_is_for_this_server_s_host_only(running: Running) -> None:
    status, _ = _send(running, "GET", f"/api/challenge?nonce={handshake.new_nonce()}",
                      headers={"Host": "rebound.example:80"})
    assert status == 421

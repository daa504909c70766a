"""The challenge and signed requests of :mod:`livecam.control.handshake`: the server nonces on
their own, then against a real running app: the server proves it holds the token to anyone who
asks, and a signed request is accepted once, for exactly the method, path, query and body
signed."""

from __future__ import annotations

import functools
import http.client
import json
import time
import tracemalloc
from typing import Any

import pytest

from livecam.control import handshake
from livecam.control.handshake import ServerNonces
from tests.control.conftest import Running

_S = 10**9  # ns


class _Clock:
    """A monotonic clock in ns that moves only when a test moves it."""

    def __init__(self) -> None:
        self.now_ns = 100 * _S

    def __call__(self) -> int:
        return self.now_ns


def test_a_server_nonce_is_good_once() -> None:
    nonces = ServerNonces()
    nonce = nonces.issue()
    assert handshake.is_nonce(nonce)  # what ctl checks: S is 32 hex characters, as before
    assert nonces.usable(nonce)
    assert nonces.spend(nonce)
    assert not nonces.usable(nonce)
    assert not nonces.spend(nonce)
    assert not nonces.usable(handshake.new_nonce())  # never issued
    assert not nonces.spend(handshake.new_nonce())


def test_a_server_nonce_expires() -> None:
    clock = _Clock()
    nonces = ServerNonces(ttl_s=30.0, clock_ns=clock)
    old = nonces.issue()
    clock.now_ns += 1 * _S
    young = nonces.issue()
    clock.now_ns += 29 * _S
    assert not nonces.usable(old)  # 30 s old
    assert not nonces.spend(old)
    assert nonces.spend(young)  # 29 s old


def test_issuing_many_voids_none() -> None:
    # anyone may ask for challenges: however many, an S a client holds stays good
    nonces = ServerNonces(clock_ns=_Clock())  # a clock that never moves: stamps still differ
    kept = nonces.issue()
    issued = {nonces.issue() for _ in range(5000)}
    assert len(issued) == 5000 and kept not in issued
    assert nonces.spend(kept)
    assert all(nonces.usable(n) for n in issued)


def test_issuing_keeps_nothing() -> None:
    nonces = ServerNonces()
    tracemalloc.start()
    try:
        before_bytes = tracemalloc.get_traced_memory()[0]
        for _ in range(5000):
            nonces.issue()
        kept_bytes = tracemalloc.get_traced_memory()[0] - before_bytes
    finally:
        tracemalloc.stop()
    assert kept_bytes < 5000  # under a byte an S: a store of them took ~150 bytes an S


def _altered(nonce: str, at: int) -> str:
    flipped = "0" if nonce[at] != "0" else "1"
    return nonce[:at] + flipped + nonce[at + 1:]


def test_only_server_nonces_issued_here_are_usable() -> None:
    nonces = ServerNonces()
    nonce = nonces.issue()
    # each hex digit altered: in the issue stamp (say, to look fresh) or in its MAC
    assert not any(nonces.usable(_altered(nonce, at)) for at in range(len(nonce)))
    assert not nonces.usable(ServerNonces().issue())  # another process's (a restart)
    assert not nonces.usable(nonce.upper())
    assert nonces.spend(nonce)


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
    assert handshake.is_nonce(answer["nonce"])  # what ctl checks before it signs
    return str(answer["nonce"])


def _challenges(r: Running, count: int) -> None:
    """Ask for ``count`` challenges, as any local process may: one kept-alive connection,
    so the flood costs the host little."""
    host, port = r.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        for _ in range(count):
            conn.request("GET", f"/api/challenge?nonce={handshake.new_nonce()}")
            response = conn.getresponse()
            response.read()
            assert response.status == 200
    finally:
        conn.close()


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


@pytest.mark.slow
def test_a_flood_of_challenges_does_not_fail_a_waiting_request(running: Running) -> None:
    # ctl has its proof and S; before its signed request arrives, another local process asks
    # for more challenges than the server ever kept (4096 once did): ctl's request still works
    nonce = _server_nonce(running)
    _challenges(running, 5000)
    status, doc = _signed(running, "GET", "/api/status", nonce=nonce)
    assert status == 200, doc
    assert "active_identity" in doc


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


def test_a_wrong_signature_spends_nothing(running: Running) -> None:
    # a wrong M, from a guess or another token, must not void the S that a ctl holds
    nonce = _server_nonce(running)
    wrong = [
        _signed(running, "GET", "/api/status", nonce=nonce,
                signed_as=("GET", "/api/identities", b"")),
        _send(running, "GET", "/api/status", headers={"Authorization": handshake.
              signed_authorization("other", nonce, "GET", "/api/status", b"")}),
        _send(running, "GET", "/api/status",
              headers={"Authorization": f"{handshake.SCHEME} {nonce} {'0' * 64}"}),
    ]
    assert [status for status, _ in wrong] == [401] * len(wrong), wrong
    assert all("wrong signature" in answer["error"] for _, answer in wrong)
    assert _signed(running, "GET", "/api/status", nonce=nonce)[0] == 200
    assert _signed(running, "GET", "/api/status", nonce=nonce)[0] == 401  # spent now


def test_of_two_copies_sent_at_once_one_gets_in(running: Running) -> None:
    # both arrive before either body is complete, so both pass the nonce check before either
    # is let in: only one may be
    nonce = _server_nonce(running)
    body = b'{"on": false}'
    auth = handshake.signed_authorization(running.token, nonce, "POST", "/api/bypass", body)
    host, port = running.url.removeprefix("http://").rsplit(":", 1)
    conns = [http.client.HTTPConnection(host, int(port), timeout=60) for _ in range(2)]
    try:
        for conn in conns:
            conn.putrequest("POST", "/api/bypass")
            conn.putheader("Authorization", auth)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body[:-1])
        time.sleep(0.5)  # the server has read both heads by now (if not, they only serialize)
        for conn in conns:
            conn.send(body[-1:])
        statuses = sorted(conn.getresponse().status for conn in conns)
    finally:
        for conn in conns:
            conn.close()
    assert statuses == [200, 401]


@pytest.fixture
def clocked(monkeypatch: pytest.MonkeyPatch,
            request: pytest.FixtureRequest) -> tuple[Running, _Clock]:
    """A running app whose server nonces go by a clock the test moves."""
    clock = _Clock()
    monkeypatch.setattr(handshake, "ServerNonces", functools.partial(ServerNonces,
                                                                     clock_ns=clock))
    return request.getfixturevalue("running"), clock


def test_a_made_up_altered_or_expired_server_nonce_is_refused(
        clocked: tuple[Running, _Clock]) -> None:
    running, clock = clocked
    expired = _server_nonce(running)
    clock.now_ns += 30 * _S
    made_up = [
        handshake.new_nonce(),
        _altered(_server_nonce(running), 0),  # its issue stamp
        _altered(_server_nonce(running), 31),  # its MAC
        ServerNonces(clock_ns=clock).issue(),  # another process's (a restart)
        expired,
    ]
    refused = [_signed(running, "GET", "/api/status", nonce=n) for n in made_up]
    assert [status for status, _ in refused] == [401] * len(refused), refused
    assert all(answer["error"].startswith("signed request refused: its server nonce is unknown, "
                                          "used or expired") for _, answer in refused)
    assert _signed(running, "GET", "/api/status")[0] == 200  # a fresh S on the same clock


def test_the_challenge_is_for_this_server_s_host_only(running: Running) -> None:
    status, _ = _send(running, "GET", f"/api/challenge?nonce={handshake.new_nonce()}",
                      headers={"Host": "rebound.example:80"})
    assert status == 421

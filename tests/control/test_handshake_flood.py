"""The spent server nonces under a flood of signed requests: kept to a cap, and never at the
price of a replay.

Only holders of the token spend an S, and each spent S is kept only until it expires (30 s),
but within those 30 s a looping script or a bug that holds the token grew the set without
bound: every signed request let in added one."""

from __future__ import annotations

import functools
import tracemalloc

import pytest

from livecam.control import handshake
from livecam.control.handshake import ServerNonces
from tests.control.conftest import Running
from tests.control.test_handshake import _S, _Clock, _server_nonce, _signed

_MS = 10**6  # ns


def _flood(nonces: ServerNonces, clock: _Clock, count: int) -> list[str]:
    """``count`` signed requests as ctl sends them, 1 ms apart: each S asked for, then spent
    (all let in); their S."""
    accepted = []
    for _ in range(count):
        nonce = nonces.issue()
        assert nonces.spend(nonce)
        accepted.append(nonce)
        clock.now_ns += 1 * _MS
    return accepted


def test_a_flood_keeps_at_most_the_cap_and_no_accepted_nonce_gets_in_twice() -> None:
    clock = _Clock()
    nonces = ServerNonces(max_spent=64, clock_ns=clock)
    accepted = _flood(nonces, clock, 1000)  # 1 s: every S is still within its 30 s
    assert nonces.spent_kept <= 64
    assert not [n for n in accepted if nonces.usable(n)]
    assert not [n for n in accepted if nonces.spend(n)]
    assert nonces.spend(nonces.issue())  # the flood locks no one out: a fresh S gets in


def test_the_nonces_a_flood_voids_are_only_those_issued_before_what_it_forgot() -> None:
    clock = _Clock()
    nonces = ServerNonces(max_spent=64, clock_ns=clock)
    held = nonces.issue()  # a ctl's, signed while 63 others got in: still good
    _flood(nonces, clock, 63)
    assert nonces.spend(held)
    held = nonces.issue()  # one held while 1000 got in: expires before what was forgotten
    _flood(nonces, clock, 1000)
    assert not nonces.usable(held) and not nonces.spend(held)


def test_spent_nonces_expire_from_the_set() -> None:
    clock = _Clock()
    nonces = ServerNonces(ttl_s=30.0, max_spent=64, clock_ns=clock)
    _flood(nonces, clock, 10)
    clock.now_ns += 30 * _S
    assert nonces.spend(nonces.issue())
    assert nonces.spent_kept == 1


def test_a_flood_at_the_default_cap_keeps_bounded_memory() -> None:
    clock = _Clock()
    nonces = ServerNonces(clock_ns=clock)
    tracemalloc.start()
    try:
        before_bytes = tracemalloc.get_traced_memory()[0]
        accepted = _flood(nonces, clock, 20_000)  # 20 s: every S is still within its 30 s
        del accepted  # what stays is what the server keeps
        kept_bytes = tracemalloc.get_traced_memory()[0] - before_bytes
    finally:
        tracemalloc.stop()
    # the default cap (4096) at a few hundred bytes each; unbounded, these 20 000 kept 2.7 MB
    assert kept_bytes < 1_500_000, kept_bytes


def test_the_api_refuses_a_replay_of_a_nonce_its_full_set_forgot(
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.setattr(handshake, "ServerNonces", functools.partial(ServerNonces,
                                                                     max_spent=4))
    running: Running = request.getfixturevalue("running")
    first = _server_nonce(running)
    assert _signed(running, "GET", "/api/status", nonce=first)[0] == 200
    for _ in range(10):  # the first is forgotten after 4
        assert _signed(running, "GET", "/api/status")[0] == 200
    status, answer = _signed(running, "GET", "/api/status", nonce=first)
    assert status == 401, answer
    assert answer["error"].startswith("signed request refused: its server nonce is unknown, "
                                      "used or expired")
    assert _signed(running, "GET", "/api/status")[0] == 200

"""PreparedIdentities, the worker thread every swap stage prepares identities on: who waits,
who is answered at once, and what a failure does."""

from __future__ import annotations

import threading

import pytest

from livecam.core.errors import EngineUnavailableError, IdentityError
from livecam.core.types import Unswappable
from livecam.swap.prepared import PreparedIdentities
from tests.swap.held_identity import HeldIdentity


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_first_use_waits_and_so_does_a_second_caller_meanwhile() -> None:
    """Streams of one process start together: the first frame of each asks for the active
    identity. The first caller waits for it (frames of a file are swapped from the start), and
    before, a second caller meanwhile was answered 'loading' and its stream's first frames
    covered (the two-stream `livecam run` test failed so under load)."""
    held = HeldIdentity(lambda name: f"prepared {name}", "astro")
    prepared: PreparedIdentities[str] = PreparedIdentities(held, retry_s=5.0)
    try:
        first: list[object] = []
        starter = threading.Thread(target=lambda: first.append(prepared.get("astro")),
                                   daemon=True)
        starter.start()
        assert held.started.wait(60)
        second: list[object] = []
        other = threading.Thread(target=lambda: second.append(prepared.get("astro")),
                                 daemon=True)
        other.start()
        other.join(0.5)
        assert other.is_alive(), "the second caller did not wait for the first use"
        held.release.set()
        starter.join(60)
        other.join(60)
        assert first == second == ["prepared astro"]
    finally:
        held.release.set()
        prepared.close()


def test_an_identity_prepared_ahead_is_loading_until_ready_never_waited_for() -> None:
    held = HeldIdentity(lambda name: f"prepared {name}", "bob")
    prepared: PreparedIdentities[str] = PreparedIdentities(held, retry_s=5.0)
    try:
        prepared.ahead(["bob"])
        got = held.returns_while_held(lambda: prepared.get("bob"))
        assert got is Unswappable.IDENTITY_LOADING
        assert prepared.wait("bob", 60)
        assert prepared.get("bob") == "prepared bob"
    finally:
        held.release.set()
        prepared.close()


def test_a_missing_identity_is_tried_again_after_the_interval_on_the_worker() -> None:
    clock, calls = _Clock(), []

    def prepare(name: str) -> str:
        calls.append(name)
        if len(calls) == 1:
            raise IdentityError(f"no identity {name!r}")
        return f"prepared {name}"

    prepared: PreparedIdentities[str] = PreparedIdentities(prepare, retry_s=5.0, clock=clock)
    try:
        assert prepared.get("ghost") is Unswappable.IDENTITY_MISSING  # first use: waited
        assert "no identity 'ghost'" in prepared.why("ghost")
        prepared.ahead(["ghost"])  # a failed identity is not retried ahead of its interval
        for _ in range(3):
            assert prepared.get("ghost") is Unswappable.IDENTITY_MISSING
        assert calls == ["ghost"]
        clock.t += 5.0
        again = prepared.get("ghost")  # the retry runs on the worker: not waited for
        assert again in (Unswappable.IDENTITY_LOADING, "prepared ghost")
        assert prepared.wait("ghost", 60)
        assert prepared.get("ghost") == "prepared ghost" and calls == ["ghost", "ghost"]
    finally:
        prepared.close()


def test_another_error_reaches_the_caller_and_is_tried_again_at_the_next_use() -> None:
    """A remote recognizer that does not answer is the stage's to handle (it covers that
    frame's faces), not an identity that is missing for ``retry_s``."""
    answers: list[BaseException | str] = [EngineUnavailableError("no answer"), "prepared x"]

    def prepare(name: str) -> str:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    prepared: PreparedIdentities[str] = PreparedIdentities(prepare, retry_s=5.0)
    try:
        with pytest.raises(EngineUnavailableError):
            prepared.get("x")
        assert prepared.get("x") == "prepared x"
    finally:
        prepared.close()


def test_ahead_prepares_at_most_sixteen_and_close_drops_what_is_under_way() -> None:
    held = HeldIdentity(lambda name: f"prepared {name}", "n0")
    asked: list[str] = []

    def prepare(name: str) -> str:
        asked.append(name)
        return str(held(name))

    prepared: PreparedIdentities[str] = PreparedIdentities(prepare, retry_s=5.0)
    prepared.ahead([f"n{k}" for k in range(1000)])  # an alias bomb of a library
    assert held.started.wait(60)
    under_way = prepared._pending["n0"]
    prepared.close()  # n0 is under way: its result must not come back after close
    held.release.set()
    assert under_way.result(60) == "prepared n0"  # its preparation has ended
    assert asked == ["n0"]  # the other fifteen were cancelled, the rest never queued
    assert "n0" not in prepared._ready and prepared.get("n0") == "prepared n0"  # afresh
    prepared.close()

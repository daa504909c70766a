"""The one-item mailbox: newest wins (live) or the producer waits (offline); close wakes all."""

from __future__ import annotations

import threading
import time

import pytest

from livecam.core.mailbox import Mailbox, MailboxClosed


def test_latest_policy_keeps_newest_and_counts_drops() -> None:
    box: Mailbox[int] = Mailbox(policy="latest")
    for i in range(5):
        assert box.put(i)
    assert box.get(timeout_s=0) == 4
    assert box.dropped == 4
    assert box.get(timeout_s=0) is None


def test_block_policy_never_drops() -> None:
    box: Mailbox[int] = Mailbox(policy="block")
    got: list[int] = []

    def consume() -> None:
        while True:
            try:
                item = box.get(timeout_s=1)
            except MailboxClosed:
                return
            if item is not None:
                got.append(item)
                time.sleep(0.001)

    t = threading.Thread(target=consume)
    t.start()
    for i in range(50):
        assert box.put(i)
    box.close()
    t.join(60)
    assert not t.is_alive() and got == list(range(50))
    assert box.dropped == 0


def test_block_put_times_out_when_not_taken() -> None:
    box: Mailbox[int] = Mailbox(policy="block")
    assert box.put(1)
    t0 = time.perf_counter()
    assert not box.put(2, timeout_s=0.05)
    assert time.perf_counter() - t0 >= 0.04  # it did wait (an upper bound would be timing)
    assert box.get(timeout_s=0) == 1  # the refused item did not replace the waiting one


def test_close_wakes_a_waiting_get() -> None:
    box: Mailbox[int] = Mailbox()
    threading.Timer(0.05, box.close).start()
    with pytest.raises(MailboxClosed):  # a get not woken would return None after 60 s
        box.get(timeout_s=60)
    assert not box.put(1)


def test_unknown_policy_rejected() -> None:
    with pytest.raises(ValueError, match="policy"):
        Mailbox(policy="fifo")  # type: ignore[arg-type]

"""Commands are pure state transitions: given a state, expect the next one."""

from __future__ import annotations

import pytest

from livecam.core import commands as cmd
from livecam.core.types import RuntimeState

NAMES = ("alice", "bob", "carol")


def test_select_by_name_and_index() -> None:
    s0 = RuntimeState(identities=NAMES)
    s1 = cmd.SelectIdentity("bob").apply(s0)
    assert s1.active_identity == "bob" and s1.generation == 1
    assert s0.active_identity is None  # the input is not modified
    assert cmd.SelectIdentityIndex(2).apply(s1).active_identity == "carol"
    # past the end (hotkey 7 with three identities) changes nothing, not even the generation
    assert cmd.SelectIdentityIndex(6).apply(s1) is s1
    assert cmd.SelectIdentity(None).apply(s1).active_identity is None


@pytest.mark.parametrize(("active", "step", "expected"), [
    ("alice", +1, "bob"), ("carol", +1, "alice"), ("alice", -1, "carol"),
    (None, +1, "alice"), (None, -1, "carol"), ("gone", +1, "alice"),
])
def test_next_previous_wrap(active: str | None, step: int, expected: str) -> None:
    state = RuntimeState(active_identity=active, identities=NAMES)
    assert cmd.StepIdentity(step).apply(state).active_identity == expected


def test_next_with_no_identities_is_a_no_op() -> None:
    state = RuntimeState()
    assert cmd.StepIdentity(+1).apply(state) is state


def test_bypass_set_and_toggle() -> None:
    s = cmd.SetBypass(True).apply(RuntimeState())
    assert s.bypass
    assert not cmd.ToggleBypass().apply(s).bypass
    assert cmd.ToggleBypass().apply(cmd.ToggleBypass().apply(s)).bypass


def test_assign_track_overrides_active_and_clears() -> None:
    s = RuntimeState(active_identity="alice", identities=NAMES)
    s = cmd.AssignTrack(7, "bob").apply(s)
    s = cmd.AssignTrack(3, "carol").apply(s)
    assert s.identity_for_track(7) == "bob" and s.identity_for_track(3) == "carol"
    assert s.identity_for_track(1) == "alice"  # unassigned tracks follow the active identity
    s = cmd.AssignTrack(7, "carol").apply(s)  # reassign replaces, never duplicates
    assert s.track_identities == ((3, "carol"), (7, "carol"))
    s = cmd.AssignTrack(7, None).apply(s)
    assert s.identity_for_track(7) == "alice"


def test_identity_list_replaced_keeps_selection() -> None:
    s = RuntimeState(active_identity="bob", identities=NAMES)
    s2 = cmd.SetIdentityList(("bob", "dave")).apply(s)
    assert s2.identities == ("bob", "dave") and s2.active_identity == "bob"
    assert cmd.StepIdentity(+1).apply(s2).active_identity == "dave"


class _Hooks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def request_reload(self, result: object = None) -> None:
        self.calls.append(("reload", ""))

    def save_snapshot(self, path: str) -> None:
        self.calls.append(("snapshot", path))

    def set_output_delay(self, delay_ms: float) -> None:
        self.calls.append(("delay", str(delay_ms)))


def test_effects_call_hooks_and_leave_state_alone() -> None:
    hooks = _Hooks()
    state = RuntimeState(active_identity="bob")
    for command in (cmd.Reload(), cmd.SaveSnapshot("/tmp/x.png"), cmd.SetOutputDelay(120.0)):
        assert isinstance(command, cmd.EffectCommand)
        command.perform(hooks)
        assert command.apply(state) is state
    assert hooks.calls == [("reload", ""), ("snapshot", "/tmp/x.png"), ("delay", "120.0")]
    assert not isinstance(cmd.SelectIdentity("x"), cmd.EffectCommand)


def test_queue_ticket_resolves_with_state() -> None:
    queue = cmd.CommandQueue()
    ticket = queue.put(cmd.SetBypass(True))
    assert not ticket.wait(0.01)
    [(command, same)] = queue.drain()
    same.resolve(command.apply(RuntimeState()), frames_sent=12, first_frame_index=40)
    assert ticket.wait(0) and ticket.state is not None and ticket.state.bypass
    assert ticket.frames_sent == 12 and ticket.first_frame_index == 40
    assert queue.drain() == []


def test_ticket_callbacks_fire_once_applied() -> None:
    ticket = cmd.Ticket()
    fired: list[str] = []
    ticket.add_done_callback(lambda: fired.append("early"))
    assert fired == []
    ticket.resolve(RuntimeState(), frames_sent=3, first_frame_index=5)
    ticket.add_done_callback(lambda: fired.append("late"))  # already applied: at once
    assert fired == ["early", "late"]


def test_put_without_waiting_refuses_a_full_queue() -> None:
    import queue as queues

    q = cmd.CommandQueue(maxsize=2)
    q.put(cmd.Reload(), timeout_s=0)
    q.put(cmd.Reload(), timeout_s=0)
    with pytest.raises(queues.Full):  # at once: the API's event loop must never block here
        q.put(cmd.Reload(), timeout_s=0)
    assert len(q.drain()) == 2

"""Key bindings from the control config, and the preview window's key handler."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from livecam.config.control import ControlConfig
from livecam.control.keymap import (
    PressLedger,
    WindowKeys,
    bindings,
    fires_while_typing,
    window_key,
)
from livecam.core import commands as cmd
from livecam.core.errors import ConfigError


def test_default_bindings_hold_modifiers() -> None:
    keymap = bindings(ControlConfig())
    assert keymap["<ctrl>+<alt>+1"]() == cmd.SelectIdentityIndex(0)
    assert keymap["<ctrl>+<alt>+9"]() == cmd.SelectIdentityIndex(8)
    assert keymap["<ctrl>+<alt>+n"]() == cmd.StepIdentity(+1)
    assert keymap["<ctrl>+<alt>+p"]() == cmd.StepIdentity(-1)
    assert keymap["<ctrl>+<alt>+b"]() == cmd.ToggleBypass()
    assert "" not in keymap  # the snapshot key is unbound by default
    # no default global hotkey is a key that typing text presses
    assert not [k for k in keymap if fires_while_typing(k)]


def test_rebinding_and_conflicts() -> None:
    config = dataclasses.replace(ControlConfig(), key_bypass="b",
                                 keys_select=("<f1>", "<f2>"), key_snapshot="s")
    keymap = bindings(config, snapshot=lambda: cmd.SaveSnapshot("/x.png"))
    assert keymap["b"]() == cmd.ToggleBypass()
    assert keymap["<f2>"]() == cmd.SelectIdentityIndex(1) and "<ctrl>+<alt>+1" not in keymap
    assert keymap["s"]() == cmd.SaveSnapshot("/x.png")
    with pytest.raises(ConfigError, match=r"control.key_bypass: key '<ctrl>\+<alt>\+1' is "
                                          "already bound"):
        bindings(dataclasses.replace(ControlConfig(), key_bypass="<ctrl>+<alt>+1"))


@pytest.mark.parametrize(("binding", "typing"), [
    ("b", True), ("1", True), ("]", True), ("<shift>+b", True), ("<space>", True),
    ("+", True), ("<ctrl>+<alt>+b", False), ("<ctrl>+1", False), ("<alt>+b", False),
    ("<cmd>+b", False), ("<f1>", False), ("<ctrl>++", False), ("<media_play_pause>", False),
])
def test_which_bindings_fire_while_typing(binding: str, typing: bool) -> None:
    assert fires_while_typing(binding) is typing


@pytest.mark.parametrize(("binding", "key"), [
    ("<ctrl>+<alt>+1", "1"), ("<ctrl>+<alt>+B", "b"), ("b", "b"), ("]", "]"), ("<f1>", None),
    ("<ctrl>++", "+"), ("+", "+"),
])
def test_window_key_is_the_last_key_alone(binding: str, key: str | None) -> None:
    assert window_key(binding) == key


def test_window_keys_queue_commands() -> None:
    queue = cmd.CommandQueue()
    keys = WindowKeys(bindings(ControlConfig()), queue)
    for char in "2npbxq":
        keys.on_key(ord(char))
    keys.on_key(27)
    got = [c for c, _ in queue.drain()]
    assert got == [cmd.SelectIdentityIndex(1), cmd.StepIdentity(+1), cmd.StepIdentity(-1),
                   cmd.ToggleBypass(), cmd.Quit(), cmd.Quit()]  # 'x' is unbound


def test_window_keys_that_collide_keep_the_first(caplog: pytest.LogCaptureFixture) -> None:
    config = dataclasses.replace(ControlConfig(), key_bypass="<alt>+1")  # '1' in the window
    queue = cmd.CommandQueue()
    with caplog.at_level(logging.WARNING, logger="livecam.control.keymap"):
        keys = WindowKeys(bindings(config), queue)
    keys.on_key(ord("1"))
    assert [c for c, _ in queue.drain()] == [cmd.SelectIdentityIndex(0)]
    assert "both mean key '1'" in caplog.text


def test_a_press_reported_by_both_sources_acts_once() -> None:
    now = [0.0]
    ledger = PressLedger(pair_s=1.0, clock=lambda: now[0])
    b = "<ctrl>+<alt>+b"
    assert ledger.first(b, "global") and not ledger.first(b, "window")  # one press, two reports
    now[0] = 0.1
    assert ledger.first(b, "window") and not ledger.first(b, "global")  # either order
    now[0] = 0.2
    assert ledger.first(b, "global") and ledger.first(b, "global")  # two presses elsewhere
    assert ledger.first("<ctrl>+<alt>+n", "window")  # another binding is another press
    now[0] = 5.0
    assert ledger.first(b, "window")  # long after: a press of its own


def test_window_keys_share_the_ledger() -> None:
    queue = cmd.CommandQueue()
    ledger = PressLedger()
    keys = WindowKeys(bindings(ControlConfig()), queue, presses=ledger)
    assert ledger.first("<ctrl>+<alt>+b", "global")
    keys.on_key(ord("b"))  # the window's report of that same press
    keys.on_key(ord("q"))
    assert [c for c, _ in queue.drain()] == [cmd.Quit()]

"""Key bindings from the control config, and the preview window's key handler."""

from __future__ import annotations

import dataclasses

import pytest

from livecam.config.control import ControlConfig
from livecam.control.keymap import WindowKeys, bindings
from livecam.core import commands as cmd
from livecam.core.errors import ConfigError


def test_default_bindings() -> None:
    keymap = bindings(ControlConfig())
    assert keymap["1"]() == cmd.SelectIdentityIndex(0)
    assert keymap["9"]() == cmd.SelectIdentityIndex(8)
    assert keymap["]"]() == cmd.StepIdentity(+1)
    assert keymap["["]() == cmd.StepIdentity(-1)
    assert keymap["b"]() == cmd.ToggleBypass()
    assert "" not in keymap  # the snapshot key is unbound by default


def test_rebinding_and_conflicts() -> None:
    config = dataclasses.replace(ControlConfig(), key_bypass="<ctrl>+<alt>+b",
                                 keys_select=("<f1>", "<f2>"), key_snapshot="s")
    keymap = bindings(config, snapshot=lambda: cmd.SaveSnapshot("/x.png"))
    assert keymap["<ctrl>+<alt>+b"]() == cmd.ToggleBypass()
    assert keymap["<f2>"]() == cmd.SelectIdentityIndex(1) and "1" not in keymap
    assert keymap["s"]() == cmd.SaveSnapshot("/x.png")
    with pytest.raises(ConfigError, match=r"control.key_bypass: key '1' is already bound"):
        bindings(dataclasses.replace(ControlConfig(), key_bypass="1"))


def test_window_keys_queue_commands() -> None:
    queue = cmd.CommandQueue()
    keys = WindowKeys(bindings(ControlConfig()), queue)
    for char in "2]bxq":
        keys.on_key(ord(char))
    keys.on_key(27)
    got = [c for c, _ in queue.drain()]
    assert got == [cmd.SelectIdentityIndex(1), cmd.StepIdentity(+1), cmd.ToggleBypass(),
                   cmd.Quit(), cmd.Quit()]  # 'x' is unbound

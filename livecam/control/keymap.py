"""Key bindings → commands, shared by the global hotkeys and the preview window.

Bindings use pynput's hotkey syntax (``b``, ``]``, ``<f1>``, ``<ctrl>+<alt>+1``); the preview
window only sees single characters, so it uses the bindings that are one character long.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from livecam.config.control import ControlConfig
from livecam.core import commands as cmd
from livecam.core.commands import CommandQueue
from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

CommandFactory = Callable[[], cmd.Command]


def _select(index: int) -> CommandFactory:
    return lambda: cmd.SelectIdentityIndex(index)


def bindings(config: ControlConfig, *, snapshot: CommandFactory | None = None
             ) -> dict[str, CommandFactory]:
    """``{binding: factory}`` from the ``control`` section; raises :class:`ConfigError` when
    one key is bound to two actions. ``snapshot`` makes the snapshot command (it needs a path
    chosen at press time); without it ``key_snapshot`` is ignored."""
    pairs: list[tuple[str, str, CommandFactory]] = [
        (f"control.keys_select[{i}]", key, _select(i))
        for i, key in enumerate(config.keys_select)
    ]
    pairs += [
        ("control.key_next", config.key_next, lambda: cmd.StepIdentity(+1)),
        ("control.key_previous", config.key_previous, lambda: cmd.StepIdentity(-1)),
        ("control.key_bypass", config.key_bypass, cmd.ToggleBypass),
    ]
    if snapshot is not None:
        pairs.append(("control.key_snapshot", config.key_snapshot, snapshot))
    out: dict[str, CommandFactory] = {}
    owner: dict[str, str] = {}
    for where, key, factory in pairs:
        key = key.strip()
        if not key:
            continue
        if key in out:
            raise ConfigError(f"{where}: key {key!r} is already bound by {owner[key]}; bind "
                              "each key once")
        out[key], owner[key] = factory, where
    return out


class WindowKeys:
    """``on_key`` for :class:`livecam.output.sinks.WindowSink`: single-character bindings of
    the preview window, plus ``q``/Esc to quit when they are not bound to something else.

    Called on the output thread; it only queues commands.
    """

    def __init__(self, keymap: dict[str, CommandFactory], commands: CommandQueue) -> None:
        self._by_code = {ord(k): f for k, f in keymap.items() if len(k) == 1 and ord(k) < 256}
        for code in (ord("q"), 27):
            self._by_code.setdefault(code, cmd.Quit)
        self._commands = commands

    def on_key(self, code: int) -> None:
        factory = self._by_code.get(code)
        if factory is not None:
            self._commands.put(factory())

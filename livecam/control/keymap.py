"""Key bindings → commands, shared by the global hotkeys and the preview window.

Bindings use pynput's hotkey syntax (``<ctrl>+<alt>+1``, ``<f1>``, ``b``). Global hotkeys fire
whatever program has the focus, so the defaults hold two modifiers: typing text never produces
them. The preview window only has livecam's focus, so there each binding works as its last key
alone (``<ctrl>+<alt>+1`` → ``1``, ``b`` → ``b``); bindings that end in a named key (``<f1>``)
have no window key (OpenCV's windows report characters only).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from livecam.config.control import ControlConfig
from livecam.core import commands as cmd
from livecam.core.commands import Commands
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
        pairs.append(("advanced.control.key_snapshot", config.key_snapshot, snapshot))
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


#: Modifiers that keep a binding from firing while text is typed (shift does not: it types).
_TEXT_SAFE_MODIFIERS = ("<ctrl>", "<alt>", "<cmd>", "<ctrl_l>", "<ctrl_r>", "<alt_l>",
                        "<alt_r>", "<alt_gr>", "<cmd_l>", "<cmd_r>")


def _parts(binding: str) -> list[str]:
    # "+" itself may be the key: "<ctrl>++" ends in "+", a lone "+" is the key
    text = binding.strip()
    if text.endswith("++") or text == "+":
        return [*[p for p in text[:-2].split("+") if p], "+"]
    return [p for p in text.split("+") if p]


def fires_while_typing(binding: str) -> bool:
    """True when ``binding`` is a key that typing text presses: a character alone or with
    shift (``b``, ``1``, ``<shift>+b``), or space/enter/tab/backspace. Such a global hotkey fires
    while the user types in another program."""
    parts = _parts(binding.lower())
    if not parts or any(p in _TEXT_SAFE_MODIFIERS for p in parts[:-1]):
        return False
    return len(parts[-1]) == 1 or parts[-1] in ("<space>", "<enter>", "<tab>", "<backspace>")


def window_key(binding: str) -> str | None:
    """The character a binding stands for in the preview window (its last key, without the
    modifiers), or None for a named key such as ``<f1>``."""
    parts = _parts(binding)
    if not parts or len(parts[-1]) != 1 or ord(parts[-1]) >= 256:
        return None
    # with modifiers, pynput matches letters in any case (HotkeySource lowercases them)
    return parts[-1].lower() if len(parts) > 1 else parts[-1]


class PressLedger:
    """Makes one key press act once when it reaches livecam twice.

    A press made while the preview window has the focus is seen by the global listener (pynput
    records every key on the display) and by the window, which gets Ctrl+Alt+B as a plain
    ``b`` (OpenCV reports no modifiers): a toggle would flip twice, ``next`` would step twice.
    Each source calls ``first(binding, source)`` before acting; a report that the other source
    made for the same binding within ``pair_s`` is that same press, and is dropped. Any thread.
    """

    def __init__(self, *, pair_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pair_s = pair_s
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[str, float]]] = {}

    def first(self, binding: str, source: str) -> bool:
        """True if this report of ``binding`` from ``source`` ("global", "window") should act."""
        with self._lock:
            now = self._clock()
            pending = [(s, t) for s, t in self._pending.get(binding, ())
                       if now - t <= self._pair_s]
            for i, (other, _) in enumerate(pending):
                if other != source:  # the other report of a press that already acted
                    del pending[i]
                    self._pending[binding] = pending
                    return False
            self._pending[binding] = [*pending, (source, now)]
            return True


class WindowKeys:
    """``on_key`` for :class:`livecam.output.window.WindowSink`: each binding's last key alone
    (see :func:`window_key`), plus ``q``/Esc to quit when they are not bound to something else.
    Where two bindings leave the same key, the first (in ``keymap`` order) keeps it and a
    warning says so. With ``presses`` shared with the global hotkeys, a press both of them
    report acts once.

    Called on the window's GUI thread; it only queues commands.
    """

    def __init__(self, keymap: dict[str, CommandFactory], commands: Commands, *,
                 presses: PressLedger | None = None) -> None:
        self._by_code: dict[int, tuple[str, CommandFactory]] = {}
        for binding, factory in keymap.items():
            key = window_key(binding)
            if key is None:
                continue
            if ord(key) in self._by_code:
                owner = self._by_code[ord(key)][0]
                log.warning("preview window: %r and %r both mean key %r there; %r keeps it",
                            owner, binding, key, owner)
                continue
            self._by_code[ord(key)] = (binding, factory)
        for code in (ord("q"), 27):
            self._by_code.setdefault(code, ("", cmd.Quit))  # "": no global binding to pair
        self._commands = commands
        self._presses = presses

    def on_key(self, code: int) -> None:
        binding, factory = self._by_code.get(code, ("", None))
        if factory is None:
            return
        if binding and self._presses is not None and not self._presses.first(binding, "window"):
            return
        self._commands.put(factory())

"""Global hotkeys through pynput, where a display exists.

Global hotkeys fire whichever program has the focus. The default bindings hold Ctrl+Alt so that
typing text never fires them; a binding that is a plain key still works, with a warning at
start that it fires while the user types elsewhere (see :func:`keymap.fires_while_typing`).

Without a display (a server, `livecam daemon`, an SSH session) or without pynput, hotkeys are
off and one log line says why; nothing else changes. pynput calls back on its own listener
thread, which only queues commands.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from livecam.control.keymap import CommandFactory, PressLedger, fires_while_typing
from livecam.core.commands import Commands

log = logging.getLogger(__name__)


def display_missing_reason() -> str | None:
    """Why global hotkeys cannot work here, or None when a display is there."""
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        if os.environ.get("WAYLAND_DISPLAY"):
            return ("Wayland without XWayland's DISPLAY: global hotkeys need X11; use the "
                    "panel or `livecam ctl`")
        return "no display (DISPLAY is not set): use the control panel or `livecam ctl`"
    return None


class HotkeySource:
    """Turns global key presses into commands on ``commands``.

    ``start`` returns False (after one log line) when hotkeys cannot work here; ``stop`` is
    idempotent. Construct and start/stop from the main thread. ``presses``, shared with the
    preview window's keys, makes a press that both see act once.
    """

    def __init__(self, keymap: dict[str, CommandFactory], commands: Commands, *,
                 presses: PressLedger | None = None) -> None:
        self._keymap = dict(keymap)
        self._commands = commands
        self._presses = presses
        self._listener: Any = None

    @property
    def active(self) -> bool:
        return self._listener is not None

    def start(self) -> bool:
        reason = display_missing_reason()
        if reason is None:
            try:
                from pynput import keyboard
            except ImportError as exc:  # pynput imports its X backend at import time
                reason = f"pynput is not usable ({exc}): pip install pynput"
        if reason is not None:
            log.info("hotkeys off: %s", reason)
            return False
        # each binding on its own: one typo must not take the others (bypass among them) away
        hotkeys: list[Any] = []
        bound: list[str] = []
        for binding, factory in self._keymap.items():
            try:
                keys = keyboard.HotKey.parse(self._canonical(binding))
            except ValueError as exc:
                log.warning("hotkey %r skipped: not valid pynput syntax (%s); use e.g. `b`, "
                            "`<f1>`, `<ctrl>+<alt>+1` in the control section; the other "
                            "hotkeys work", binding, exc)
                continue
            hotkeys.append(keyboard.HotKey(keys, self._callback(binding, factory)))
            bound.append(binding)
        if not hotkeys:
            log.warning("hotkeys off: no binding in the control section is valid")
            return False
        # pynput's GlobalHotKeys ignores injected key events; a Stream Deck or a macro tool
        # sends exactly those, so this listener feeds the same HotKey objects with all events.
        listener: Any = None

        def on_press(key: Any, _injected: bool = False) -> None:
            for hotkey in hotkeys:
                hotkey.press(listener.canonical(key))

        def on_release(key: Any, _injected: bool = False) -> None:
            for hotkey in hotkeys:
                hotkey.release(listener.canonical(key))

        try:
            listener = keyboard.Listener(on_press=on_press, on_release=on_release)
            listener.start()
            listener.wait()
        except Exception as exc:  # an X server without RECORD, a refused connection, ...
            log.info("hotkeys off: the key listener could not start (%s)", exc)
            return False
        self._listener = listener
        log.info("hotkeys on: %s", ", ".join(sorted(bound)))
        typed = sorted(k for k in bound if fires_while_typing(k))
        if typed:
            log.warning("hotkeys %s are plain keys: they fire while you type in any program "
                        "(a bypass key shows your real face); bind them with modifiers, e.g. "
                        "`<ctrl>+<alt>+b`, in the control section", ", ".join(typed))
        return True

    @staticmethod
    def _canonical(binding: str) -> str:
        # pynput wants "<ctrl>+<alt>+1"; plain characters are kept as they are (case matters)
        return binding.strip().lower() if len(binding.strip()) > 1 else binding.strip()

    def _callback(self, binding: str, factory: CommandFactory) -> Any:
        def fire() -> None:
            if self._presses is None or self._presses.first(binding, "global"):
                self._commands.put(factory())
        return fire

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None

"""Run under Xvfb by test_hotkeys.py: a real app with production control wiring (global
hotkeys via pynput), driven by key presses.

First a paragraph is typed into another program's window (an X window that has the focus),
twice: with pynput's keyboard Controller (which sends characters with XSendEvent and tells the
listeners of its own process) and through XTEST (device-level events, what a physical keyboard
makes, seen by the listener through the RECORD extension). Then the bindings are pressed through
XTEST. ``argv[1]`` names the bindings: ``defaults`` (the shipped config), ``plain``
(``control.key_bypass=b``, a plain key a user may still choose) or ``bad`` (one binding that
is not valid pynput syntax). Prints one JSON line.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from pynput.keyboard import Controller
from Xlib import XK, X, display
from Xlib.ext import xtest

from livecam.app import App, build_app
from livecam.config import load_config
from livecam.core.types import RuntimeState

#: Typed into the other window: digits, brackets and the letters of every default binding,
#: and "ok bob", which toggled bypass twice with the old single-key defaults. No character
#: needs shift, so XTEST can type it key by key on any layout Xvfb starts with (US).
PARAGRAPH = ("ok bob, see you at 10.45 in room 3b. [notes] 1 2 3 4 5 6 7 8 9 0 - next; pay "
             "the bill, ping nina. prev build broke = bug 12/3. ]]] [[[ bye\n")
_KEYSYMS = {" ": "space", ",": "comma", ".": "period", "[": "bracketleft",
            "]": "bracketright", "-": "minus", ";": "semicolon", "=": "equal", "/": "slash",
            "\n": "Return"}


class XTestKeyboard:
    """Key presses as device events (XTEST), like a physical keyboard."""

    def __init__(self) -> None:
        self._x = display.Display()

    def key(self, name: str, down: bool) -> None:
        code = self._x.keysym_to_keycode(XK.string_to_keysym(_KEYSYMS.get(name, name)))
        xtest.fake_input(self._x, X.KeyPress if down else X.KeyRelease, code)
        self._x.sync()

    def type(self, text: str) -> None:
        for char in text:
            self.key(char, True)
            self.key(char, False)
#: Keys pressed with Ctrl+Alt held: 20 that each change the state, then 9 (no ninth identity).
PRESSES = [*"2nnpb1b3123ppnbb31np", "9"]


class OtherProgram:
    """Another X client's window that has the keyboard focus and keeps the characters typed
    into it: a text box without a toolkit (python-xlib only, so it runs wherever pynput does)."""

    def __init__(self) -> None:
        self._x = display.Display()
        screen = self._x.screen()
        self._window = screen.root.create_window(
            10, 10, 400, 100, 0, screen.root_depth,
            event_mask=X.KeyPressMask | X.StructureNotifyMask)
        self._window.set_wm_name("another program")
        self._window.map()
        while self._x.next_event().type != X.MapNotify:
            pass
        self._window.set_input_focus(X.RevertToParent, X.CurrentTime)
        self._x.sync()
        self.text = ""

    def receive(self, n_chars: int, timeout_s: float = 60.0) -> str:
        """What was typed, once ``n_chars`` characters arrived (or the timeout passed)."""
        deadline = time.monotonic() + timeout_s
        while len(self.text) < n_chars and time.monotonic() < deadline:
            while self._x.pending_events():
                event = self._x.next_event()
                if event.type != X.KeyPress:
                    continue
                keysym = self._x.keycode_to_keysym(event.detail,
                                                   1 if event.state & X.ShiftMask else 0)
                if keysym == XK.XK_Return:
                    self.text += "\n"
                elif 0x20 <= keysym <= 0x7E:  # Latin-1 keysyms are their characters
                    self.text += chr(keysym)
            time.sleep(0.01)
        return self.text

    def close(self) -> None:
        self._window.destroy()
        self._x.close()


def press_with_ctrl_alt(keyboard: XTestKeyboard, key: str) -> None:
    keyboard.key("Control_L", True)
    keyboard.key("Alt_L", True)
    keyboard.key(key, True)
    keyboard.key(key, False)
    keyboard.key("Alt_L", False)
    keyboard.key("Control_L", False)


def wait_for_change(app: App, generation: int, timeout_s: float = 30.0) -> bool:
    t_end = time.perf_counter() + timeout_s
    while app.state.generation == generation and time.perf_counter() < t_end:
        time.sleep(0.001)
    return app.state.generation != generation


def main() -> None:
    mode = sys.argv[1]
    overrides = ["advanced.pipeline.status_interval_s=0", "control.api=false"]
    if mode == "plain":
        overrides.append("control.key_bypass=b")
    if mode == "bad":  # one binding pynput cannot parse: the others must still work
        overrides.append("control.key_next=<ctrl>+<alt>+<nosuchkey>")
    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger("livecam").addHandler(Collect())
    config = load_config(None, overrides)
    app = build_app(config, input_spec="synthetic:160x120", output_spec="null", controls=True,
                    state=RuntimeState(identities=("alice", "bob", "carol")))
    app.start()
    keyboard = XTestKeyboard()
    results: list[dict[str, object]] = []
    try:
        hotkeys_active = any(getattr(c, "active", False) for c in app.controls)
        generation = app.state.generation
        other = OtherProgram()
        try:
            for n, typist in enumerate((Controller(), keyboard), start=1):
                typist.type(PARAGRAPH)
                typed = other.receive(n * len(PARAGRAPH))
        finally:
            other.close()
        # a sentinel press: key events reach the listener in order, commands are applied in
        # order, so once it shows, whatever the typing triggered has been applied too
        press_with_ctrl_alt(keyboard, "3")
        t_end = time.perf_counter() + 60.0
        while app.state.active_identity != "carol" and time.perf_counter() < t_end:
            time.sleep(0.001)
        after_typing = {"changes": app.state.generation - generation - 1,
                        "active": app.state.active_identity, "bypass": app.state.bypass}
        presses = {"defaults": PRESSES, "bad": ["b", "2", "b"]}.get(mode, [])
        if presses:
            for key in presses:
                generation = app.state.generation
                t0 = time.perf_counter()
                press_with_ctrl_alt(keyboard, key)
                changed = wait_for_change(app, generation, 0.5 if key == "9" else 30.0)
                ms = (time.perf_counter() - t0) * 1000
                results.append({"key": key, "active": app.state.active_identity,
                                "bypass": app.state.bypass, "ms": round(ms, 2),
                                "changed": changed})
    finally:
        app.stop()
    json.dump({"hotkeys_active": hotkeys_active, "paragraph": PARAGRAPH, "typed": typed,
               "after_typing": after_typing, "warnings": warnings, "results": results},
              sys.stdout)


if __name__ == "__main__":
    main()

"""Run under Xvfb by test_hotkeys.py: a real app with production control wiring (global
hotkeys via pynput), driven by key presses.

First a paragraph is typed into another program's window (a Tk text box that has the focus),
twice: with pynput's keyboard Controller (which sends characters with XSendEvent and tells the
listeners of its own process) and through XTEST (device-level events, what a physical keyboard
makes, seen by the listener through the RECORD extension). Then the bindings are pressed through
XTEST. ``argv[1]`` names the bindings: ``defaults`` (the shipped config) or ``plain``
(``control.key_bypass=b``, a plain key a user may still choose). Prints one JSON line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import tkinter

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


def type_into_other_window(typists: list[Controller | XTestKeyboard]) -> str:
    """Type PARAGRAPH with each typist into a focused Tk text box; returns what it received."""
    root = tkinter.Tk()
    root.title("another program")
    text = tkinter.Text(root, width=80, height=10)
    text.pack()
    deadline = time.monotonic() + 20.0
    while not root.winfo_viewable() and time.monotonic() < deadline:
        root.update()
        time.sleep(0.01)
    root.focus_force()
    text.focus_set()
    root.update()
    got = ""
    for n, typist in enumerate(typists, start=1):
        typist.type(PARAGRAPH)
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            root.update()
            got = text.get("1.0", "end-1c")
            if len(got) >= n * len(PARAGRAPH):
                break
            time.sleep(0.01)
    time.sleep(0.3)  # any command a keystroke queued would be applied by now ...
    root.update()
    root.destroy()
    return got


def wait_for_change(app: App, generation: int, timeout_s: float = 5.0) -> bool:
    t_end = time.perf_counter() + timeout_s
    while app.state.generation == generation and time.perf_counter() < t_end:
        time.sleep(0.001)
    return app.state.generation != generation


def main() -> None:
    mode = sys.argv[1]
    overrides = ["pipeline.status_interval_s=0", "control.api=false"]
    if mode == "plain":
        overrides.append("control.key_bypass=b")
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
        typed = type_into_other_window([Controller(), keyboard])
        after_typing = {"changes": app.state.generation - generation,
                        "active": app.state.active_identity, "bypass": app.state.bypass}
        if mode == "defaults":
            for key in PRESSES:
                generation = app.state.generation
                keyboard.key("Control_L", True)
                keyboard.key("Alt_L", True)
                t0 = time.perf_counter()
                keyboard.key(key, True)
                keyboard.key(key, False)
                changed = wait_for_change(app, generation, 0.5 if key == "9" else 5.0)
                ms = (time.perf_counter() - t0) * 1000
                keyboard.key("Alt_L", False)
                keyboard.key("Control_L", False)
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

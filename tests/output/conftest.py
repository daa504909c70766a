"""A private X server (Xvfb) and the X client calls the window tests need: find a window,
read its pixels back, focus it, type into it, close it as a window manager would.

Xvfb is started by the fixture itself (as tests/control does through xvfb-run), so the tests
run the same on a desktop, in CI (``.ci/run`` installs xvfb) and over SSH. python-xlib talks to
it (pynput's own X backend on Linux, so nothing extra is installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest


@dataclass
class XScreen:
    """A connection to the fixture's X server. Test thread only."""

    name: str  # ":N", for DISPLAY
    display: Any  # Xlib.display.Display

    def find_window(self, title: str, timeout_s: float = 90.0) -> Any:
        """The mapped top-level window called ``title``, waiting for it to appear."""
        from Xlib import X

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for window in self._walk(self.display.screen().root):
                try:
                    if (window.get_wm_name() == title
                            and window.get_attributes().map_state == X.IsViewable):
                        return window
                except Exception:  # a window that went away meanwhile (Xlib raises BadWindow)
                    continue
            time.sleep(0.05)
        raise AssertionError(f"no window {title!r} appeared within {timeout_s:.0f} s")

    def manage(self, window: Any) -> None:
        """Take ``window`` in as a window manager does when a new window appears: it reparents
        it, which unmaps and maps it again, and waits until the server has done both.

        Needed on this bare X server (no window manager): on a loaded host, Qt (the GUI of
        opencv-contrib-python) now and then misses the first map of its window and never
        paints it, though ``cv2.imshow`` keeps drawing (seen: 842 frames drawn, the window
        black for 30 s; 3 to 8 of 30 bare Qt windows with three busy loops on 2 cores; an
        Expose event or a resize did not help, a new map always did). A desktop's window
        manager maps every new window this way, so users never see it."""
        from Xlib import X

        window.change_attributes(event_mask=X.StructureNotifyMask)
        window.unmap()
        window.map()
        self.display.sync()
        deadline = time.monotonic() + 30.0  # for a window that went away: nothing to wait on
        while time.monotonic() < deadline:  # the server's own answer, in order: Unmap, Map
            if not self.display.pending_events():
                time.sleep(0.01)
                continue
            event = self.display.next_event()
            if event.type == X.MapNotify and event.window == window:
                return
        raise AssertionError("the window was not mapped again")

    def _walk(self, window: Any) -> Iterator[Any]:
        for child in window.query_tree().children:
            yield child
            yield from self._walk(child)

    def grab_bgr(self, window: Any) -> np.ndarray:
        """The window's pixels as they are on the screen now: (h, w, 3) uint8 BGR."""
        from Xlib import X

        root = self.display.screen().root
        geometry = window.get_geometry()
        at = root.translate_coords(window, 0, 0)
        image = root.get_image(at.x, at.y, geometry.width, geometry.height, X.ZPixmap,
                               0xFFFFFFFF)
        pixels = np.frombuffer(image.data, np.uint8)  # 24-bit depth: 32 bpp, B G R pad
        return pixels.reshape(geometry.height, geometry.width, 4)[:, :, :3].copy()

    def focus(self, window: Any, timeout_s: float = 30.0) -> None:
        """Give ``window`` the keyboard focus and wait until the server reports it there. A
        focus set while the toolkit still remaps its window reverts to the root, and keys
        typed then go nowhere."""
        from Xlib import X

        deadline = time.monotonic() + timeout_s
        while True:
            window.set_input_focus(X.RevertToParent, X.CurrentTime)
            self.display.sync()
            if self.display.get_input_focus().focus == window:
                return
            assert time.monotonic() < deadline, "the window never took the keyboard focus"
            time.sleep(0.05)

    def press(self, char: str, modifiers: tuple[str, ...] = ()) -> None:
        """Press and release the key that types ``char`` while holding ``modifiers`` (keysym
        names such as ``Control_L``), through XTEST: device events, as a keyboard makes."""
        from Xlib import XK, X
        from Xlib.ext import xtest

        codes = [self.display.keysym_to_keycode(XK.string_to_keysym(name))
                 for name in (*modifiers, char)]
        for code in codes:
            xtest.fake_input(self.display, X.KeyPress, code)
        for code in reversed(codes):
            xtest.fake_input(self.display, X.KeyRelease, code)
        self.display.sync()

    def close_window(self, window: Any) -> None:
        """Ask the window to close, as the title bar's close button does (WM_DELETE_WINDOW)."""
        from Xlib import X
        from Xlib.protocol import event

        protocols = self.display.intern_atom("WM_PROTOCOLS")
        delete = self.display.intern_atom("WM_DELETE_WINDOW")
        message = event.ClientMessage(window=window, client_type=protocols,
                                      data=(32, [delete, X.CurrentTime, 0, 0, 0]))
        window.send_event(message, event_mask=X.NoEventMask)
        self.display.sync()


@pytest.fixture
def xscreen() -> Iterator[XScreen]:
    """A fresh Xvfb (640x480, 24 bit) for one test, and a client connection to it."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb); .ci/run installs it")
    from Xlib import display as xdisplay

    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "640x480x24", "-nolisten", "tcp",
         "+extension", "RECORD"], pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as pipe:
            number = pipe.readline().strip()  # Xvfb writes its display number once it listens
        assert number, "Xvfb did not start"
        name = f":{number}"
        connection = xdisplay.Display(name)
        try:
            yield XScreen(name, connection)
        finally:
            connection.close()
    finally:
        server.terminate()
        server.wait(timeout=10)

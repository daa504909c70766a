"""The preview window (``--output window``): drawn by the thread that opened it.

OpenCV's GUI backends draw and deliver key presses only on the thread that created the window:
with the Qt build that ships in opencv-contrib-python, ``cv2.imshow`` from any other thread
blocks for good (0 frames drawn); Cocoa (macOS) requires the main thread outright; Win32 delivers
a window's messages to its creating thread only. So the output thread never touches the GUI
here: ``send`` hands the frame to a one-frame mailbox (the newest frame wins), and the thread
that called ``open`` (the main thread of ``livecam run``, inside ``App.wait``) calls ``pump`` in a
loop to draw it, read keys and notice the window being closed.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable

from livecam.core.errors import OutputError
from livecam.core.mailbox import Mailbox
from livecam.core.types import ImageBGR

log = logging.getLogger(__name__)


class WindowSink:
    """An OpenCV preview window; a :class:`livecam.output.base.GuiSink`.

    ``open``, ``pump`` and ``close`` run on the GUI thread (the one that calls ``open``);
    ``send`` runs on the output thread and never blocks. Keys pressed in the window go to
    ``on_key`` (an 8-bit key code, called on the GUI thread).
    """

    def __init__(self, *, title: str = "livecam",
                 on_key: Callable[[int], None] | None = None) -> None:
        self._title = title
        self._on_key = on_key
        self._inbox: Mailbox[ImageBGR] = Mailbox(policy="latest")
        self._gui_thread: int | None = None
        self._seen_visible = False
        self.drawn = 0  # frames drawn; frames replaced before they were drawn: ``skipped``

    @property
    def skipped(self) -> int:
        return self._inbox.dropped

    def open(self, *, width: int, height: int, fps: float) -> None:
        if sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        ):
            raise OutputError("--output window needs a display (no DISPLAY is set); use "
                              "--output virtualcam or --output file:out.mp4")
        import cv2

        # GUI_NORMAL: no Qt toolbar/status bar, so the window shows the frame and nothing else
        cv2.namedWindow(self._title,
                        cv2.WINDOW_NORMAL | cv2.WINDOW_KEEPRATIO | cv2.WINDOW_GUI_NORMAL)
        cv2.resizeWindow(self._title, width, height)
        self._gui_thread = threading.get_ident()

    def send(self, image_bgr: ImageBGR) -> None:
        """Hand (H, W, 3) uint8 BGR ``image_bgr`` to the GUI thread (output thread)."""
        self._inbox.put(image_bgr)

    def pump(self, timeout_s: float) -> bool:
        """Draw the newest frame (waiting up to ``timeout_s`` for one), deliver key presses;
        False once the user has closed the window. GUI thread only."""
        import cv2

        image = self._inbox.get(timeout_s=timeout_s)
        if image is not None:
            cv2.imshow(self._title, image)
            self.drawn += 1
        key = cv2.waitKey(1)  # also runs the GUI's event loop: painting, input, closing
        if key >= 0 and self._on_key is not None:
            self._on_key(key & 0xFF)
        visible = cv2.getWindowProperty(self._title, cv2.WND_PROP_VISIBLE)
        # a backend that cannot report visibility answers -1 from the start: only a window
        # that was seen visible and then is not counts as closed
        if visible >= 1:
            self._seen_visible = True
            return True
        return not self._seen_visible

    def close(self) -> None:
        if self._gui_thread is None:
            return
        self._inbox.close()
        log.info("preview window: %d frames drawn, %d replaced by a newer one before drawing",
                 self.drawn, self.skipped)
        if threading.get_ident() != self._gui_thread:
            # destroying it from another thread would block like imshow does; the process
            # exit takes the window down
            log.debug("preview window left open: close() called off the GUI thread")
            self._gui_thread = None
            return
        import cv2

        cv2.destroyWindow(self._title)
        cv2.waitKey(1)  # let the backend process the destruction before the process goes on
        self._gui_thread = None

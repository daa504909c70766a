"""The last frame the output sent, kept for the panel's preview, snapshots and status.

The output thread calls :meth:`LiveView.update` after every send; readers (the API's threads,
the snapshot hook) take the reference under a short lock. Frames are never written in place by
the pipeline (sources hand out read-only arrays and stages return new ones), so holding a
reference is enough: no per-frame copy.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from livecam.core.types import ImageBGR, Packet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LastFrame:
    """``image_bgr`` (H, W, 3) uint8 as sent; ``track_ids`` of the faces in it (may be empty);
    ``frames_sent`` counts sends up to and including this one."""

    image_bgr: ImageBGR
    track_ids: tuple[int, ...] = ()
    frames_sent: int = 0
    generation: int = 0
    repeated: bool = False


class LiveView:
    """Thread-safe holder of the newest :class:`LastFrame` (None before the first send)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: LastFrame | None = None
        self._sent = 0
        self._changed = threading.Condition(self._lock)

    def update(self, packet: Packet | None, image_bgr: ImageBGR) -> None:
        """Output thread, after each send (``packet`` is None for a repeated frame)."""
        with self._lock:
            self._sent += 1
            if packet is None and self._last is not None:
                track_ids, generation = self._last.track_ids, self._last.generation
            elif packet is not None:
                ids = packet.faces.track_ids
                track_ids = tuple(int(t) for t in np.asarray(ids) if int(t) >= 0)
                generation = packet.state.generation
            else:
                track_ids, generation = (), 0
            self._last = LastFrame(image_bgr=image_bgr, track_ids=track_ids,
                                   frames_sent=self._sent, generation=generation,
                                   repeated=packet is None)
            self._changed.notify_all()

    def last(self) -> LastFrame | None:
        """The newest frame sent, or None (any thread)."""
        with self._lock:
            return self._last

    def wait_newer(self, frames_sent: int, timeout_s: float) -> LastFrame | None:
        """Block until a frame newer than ``frames_sent`` was sent, or ``timeout_s``."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._last is not None and self._last.frames_sent > frames_sent,
                timeout_s)
            return self._last

    def save_snapshot(self, path: Path) -> None:
        """Write the newest frame sent to ``path`` (PNG/JPEG by suffix), or raise
        :class:`OSError` saying why not (nothing sent yet, not writable): the snapshot command
        logs it and the control API answers with it, the run goes on. Any thread (the
        pipeline thread, through the snapshot command)."""
        import cv2

        last = self.last()
        if last is None:
            raise OSError("snapshot not saved: no frame has been sent yet; try again")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f"snapshot not saved: its folder {path.parent} cannot be made "
                          f"({exc.strerror or exc}); set advanced.control.snapshot_dir to a folder "
                          "you can write") from None
        if not cv2.imwrite(str(path), last.image_bgr):
            raise OSError(f"snapshot not saved: {path} could not be written (a full disk, no "
                          "permission?); set advanced.control.snapshot_dir to a folder you can "
                          "write")
        log.info("snapshot saved: %s", path)

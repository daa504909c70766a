"""What the composition root (:mod:`livecam.app`) hands the runtime (:mod:`livecam.pipeline`):
the fail-closed cover and the preview sink. The runtime names only these protocols, so it
imports neither the swap (:class:`livecam.swap.cover.FaceCover`) nor the control API
(:class:`livecam.control.live.LiveView`)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from livecam.core.types import ImageBGR, Packet, WithheldFaces


class FrameCover(Protocol):
    """Hides faces when a stage failed (fail closed). Called by one pipeline thread at a time
    (the runtime holds a lock around it)."""

    @property
    def shows_real_faces(self) -> bool:
        """True when nothing is ever covered (``unswappable: real``)."""
        ...

    def cover(self, image_bgr: ImageBGR, withheld: WithheldFaces,
              frame_index: int) -> ImageBGR:
        """A new (H, W, 3) uint8 image with every face of ``withheld`` covered (the same
        array when there is nothing to cover); ``image_bgr`` is never written."""
        ...

    def cover_frame(self, image_bgr: ImageBGR) -> ImageBGR:
        """The whole frame covered: a stage failed before the faces in it were known."""
        ...


class PreviewSink(Protocol):
    """Keeps the last frame sent (panel preview, snapshots)."""

    def update(self, packet: Packet | None, image_bgr: ImageBGR) -> None:
        """Output thread, after each send (``packet`` is None for a repeated frame)."""
        ...

    def save_snapshot(self, path: Path) -> None:
        """Write the newest frame sent to ``path``, or raise :class:`OSError` with one line
        saying why not (nothing sent yet, not writable). Any thread."""
        ...

"""The no-op stage: frames pass through untouched when no identity is chosen."""

from __future__ import annotations

from livecam.core.stage import StageBase
from livecam.core.types import Packet


class PassThrough(StageBase):
    """Returns the packet as it came. Keeps the pipeline's shape (and its timing) identical
    whether or not a swap is active."""

    name = "passthrough"

    def process(self, packet: Packet) -> Packet:
        return packet

"""The stage protocol: a small object with one verb, ``process``.

A stage is constructed cheaply (config and dependencies only), does heavy work in ``open()``
(loading models, allocating buffers) and frees it in an idempotent ``close()``. It is a context
manager. Only the pipeline thread calls ``process``; it must not modify its input packet (return
a new one with ``packet.with_fields(...)``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from livecam.core.lifecycle import Lifecycle
from livecam.core.types import Packet


@runtime_checkable
class Stage(Protocol):
    """One step of the per-frame work. ``name`` labels its timings in metrics and logs."""

    name: str

    def open(self) -> None: ...

    def close(self) -> None: ...

    def process(self, packet: Packet) -> Packet: ...


class StageBase(Lifecycle):
    """Convenience base: context-manager support and no-op ``open``/``close``."""

    name = "stage"

    def process(self, packet: Packet) -> Packet:
        raise NotImplementedError

"""Commands: the only way runtime state changes during a run.

Every source of control (hotkeys, the control API, signals, the preview window) produces these
objects and puts them on one :class:`CommandQueue`; the pipeline thread drains it between frames
and applies each command to the current :class:`~livecam.types.RuntimeState`.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass, replace
from typing import Protocol

from livecam.types import RuntimeState


class Command(Protocol):
    """A change of runtime state. ``apply`` is pure: it returns the new state."""

    def apply(self, state: RuntimeState) -> RuntimeState: ...


@dataclass(frozen=True)
class SelectIdentity:
    """Make ``name`` the active identity (None = swap nothing)."""

    name: str | None

    def apply(self, state: RuntimeState) -> RuntimeState:
        return replace(state, active_identity=self.name, generation=state.generation + 1)


@dataclass(frozen=True)
class SetBypass:
    """Send the real face through (True) or swap again (False)."""

    on: bool

    def apply(self, state: RuntimeState) -> RuntimeState:
        return replace(state, bypass=self.on, generation=state.generation + 1)


@dataclass(frozen=True)
class Quit:
    """Stop the run after the current frame."""

    def apply(self, state: RuntimeState) -> RuntimeState:
        return state


class CommandQueue:
    """Thread-safe FIFO of commands; any thread may ``put``, the pipeline thread drains it."""

    def __init__(self, maxsize: int = 256) -> None:
        self._queue: queue.Queue[Command] = queue.Queue(maxsize=maxsize)

    def put(self, command: Command) -> None:
        self._queue.put(command, timeout=1.0)

    def drain(self) -> list[Command]:
        out: list[Command] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

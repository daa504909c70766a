"""Which identity a tracked face gets, the same way in every swap stage.

In order: a runtime per-track choice (``ctl assign``, the panel), then ``swap.assign`` (people
in their order of appearance: the first track seen gets ``assign[0]``, ...), then the active
identity. Tracks are numbered as they first ask, so the order is the order they were swapped.
"""

from __future__ import annotations

from livecam.core.types import RuntimeState

_MAX_REMEMBERED_TRACKS = 4096


class IdentityAssigner:
    """Per-stage memory of the order tracks appeared in (one caller: the pipeline thread)."""

    def __init__(self, assign: tuple[str, ...] = ()) -> None:
        self.assign = assign
        self._appearance: dict[int, int] = {}

    def identity_for(self, state: RuntimeState, track_id: int) -> str | None:
        chosen = state.chosen_identity(track_id)
        if chosen is not None:
            return chosen
        if self.assign and track_id >= 0:
            order = self._appearance.get(track_id)
            if order is None and len(self._appearance) < _MAX_REMEMBERED_TRACKS:
                order = self._appearance[track_id] = len(self._appearance)
            if order is not None and order < len(self.assign):
                return self.assign[order]
        return state.active_identity

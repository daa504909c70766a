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
        self._wanted_for: RuntimeState | None = None
        self._wanted: tuple[str, ...] = ()

    def wanted(self, state: RuntimeState) -> tuple[str, ...]:
        """The identities to prepare ahead, the likeliest first: the active one, those chosen
        per track, ``assign``'s, then the library's in display order (each once; worked out
        again only when the state changes)."""
        if state is not self._wanted_for:
            names = (state.active_identity, *(n for _, n in state.track_identities),
                     *self.assign, *state.identities)
            self._wanted = tuple(dict.fromkeys(n for n in names if n))
            self._wanted_for = state
        return self._wanted

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

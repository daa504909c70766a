"""``knob``: a dataclass field that carries its help text and allowed values; ``derived``: a
field a section keeps for its readers but that is set from another section's knob."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any


def knob(
    default: Any,
    help: str,
    *,
    range: tuple[float | None, float | None] | None = None,
    choices: tuple[Any, ...] | None = None,
) -> Any:
    """A config field. ``range`` is inclusive (None = open end); ``choices`` lists legal values."""
    meta = {"help": help, "range": range, "choices": choices}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def derived(default: Any, source: str) -> Any:
    """A field set from the knob ``source`` (as a user writes it:
    ``advanced.capture.reconnect_max_s``), so one setting reaches code that is handed only its
    own section. Not a key a user writes:
    :class:`~livecam.config.schema.Config` copies the knob's value in; ``default`` equals the
    knob's default (a test keeps them equal) for a section built on its own."""
    return field(default=default, metadata={"derived_from": source})


def is_derived(f: dataclasses.Field[Any]) -> bool:
    """Whether ``f`` is a :func:`derived` field (not a key of the schema)."""
    return "derived_from" in f.metadata


def user_fields(cls: Any) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of dataclass ``cls`` (or instance) that are keys a user writes."""
    return tuple(f for f in dataclasses.fields(cls) if not is_derived(f))

"""``knob``: a dataclass field that carries its help text and allowed values."""

from __future__ import annotations

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

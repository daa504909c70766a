"""Strict parsing of control API request bodies into commands.

A body is empty or a JSON object; each endpoint names the fields it takes and their types, and
anything else (an unknown field, a wrong type, ``true`` where a number is wanted, a name that
is not an identity) is refused with :class:`RequestError` before a command is queued. Pure
functions of the body and the current identity names: the fuzz tests drive them directly too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from livecam.core import commands as cmd
from livecam.core.commands import MAX_OUTPUT_DELAY_MS, MAX_TRACK_ASSIGNMENTS
from livecam.core.reload_result import ReloadResult


class RequestError(Exception):
    """A request the API refuses: ``status`` and a one-line message for ``{"error": ...}``."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _bad(message: str) -> RequestError:
    return RequestError(HTTPStatus.BAD_REQUEST, message)


def _no_constant(name: str) -> Any:
    raise _bad(f"body is not valid JSON ({name} is not a number)")


def parse_body(raw: bytes) -> dict[str, Any]:
    """``raw`` (empty, or a UTF-8 JSON object) as a dict; :class:`RequestError` (400) for
    anything else: bad UTF-8, bad JSON, NaN/Infinity, nesting too deep, not an object."""
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad("body is not UTF-8 text") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _bad("body is not valid JSON (nested too deeply)") from None
    except ValueError:  # JSONDecodeError, and ints longer than Python converts
        raise _bad("body is not valid JSON") from None
    if not isinstance(value, dict):
        raise _bad("body must be a JSON object, e.g. {\"name\": \"alice\"}")
    return value


# what a field may hold: a JSON type name -> the check
_KINDS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


@dataclass(frozen=True)
class _Field:
    kinds: tuple[str, ...]
    required: bool = False


def _fields(path: str, body: dict[str, Any], spec: dict[str, _Field]) -> dict[str, Any]:
    for key in body:
        if key not in spec:
            allowed = ", ".join(f'"{k}"' for k in spec) or "none"
            raise _bad(f"{path}: unknown field {key!r} (allowed: {allowed})")
    for key, field in spec.items():
        if key not in body:
            if field.required:
                raise _bad(f'{path}: missing field "{key}"')
            continue
        if not any(_KINDS[kind](body[key]) for kind in field.kinds):
            raise _bad(f'{path}: "{key}" must be {" or ".join(field.kinds)}')
    return body


def _known(name: str | None, names: tuple[str, ...]) -> str | None:
    if name is not None and name not in names:
        known = ", ".join(names) or "none"
        raise RequestError(HTTPStatus.NOT_FOUND, f"no identity {name!r} (known: {known}); "
                           "add it with `livecam identity add` and reload")
    return name


@dataclass(frozen=True)
class Tracks:
    """What an assignment is checked against: the track ids in the last frame sent
    (``present``), and those with an identity of their own (``assigned``: the most of any
    stream the command goes to, ``most_assigned`` of them)."""

    present: frozenset[int]
    assigned: frozenset[int]
    most_assigned: int


def _select(body: dict[str, Any], names: tuple[str, ...]) -> cmd.Command:
    _fields("/api/select", body, {"name": _Field(("string", "null")),
                                  "index": _Field(("integer",))})
    if ("name" in body) == ("index" in body):
        raise _bad('/api/select: give exactly one of "name" (null = swap nothing) or "index"')
    if "index" in body:
        index = body["index"]
        if not 0 <= index < len(names):
            raise RequestError(HTTPStatus.NOT_FOUND, f"no identity at index {index} "
                               f"({len(names)} identities)")
        return cmd.SelectIdentityIndex(index)
    return cmd.SelectIdentity(_known(body["name"], names))


def _bypass(body: dict[str, Any], names: tuple[str, ...]) -> cmd.Command:
    _fields("/api/bypass", body, {"on": _Field(("boolean",))})
    return cmd.ToggleBypass() if "on" not in body else cmd.SetBypass(body["on"])


def _assign(body: dict[str, Any], names: tuple[str, ...], tracks: Tracks | None) -> cmd.Command:
    _fields("/api/assign", body, {"track_id": _Field(("integer",), required=True),
                                  "name": _Field(("string", "null"), required=True)})
    track_id = body["track_id"]
    if track_id < 0:
        raise _bad('/api/assign: "track_id" must be a track number (see `livecam ctl status`)')
    name = _known(body["name"], names)
    if tracks is not None:
        if track_id not in tracks.present and (name is not None
                                               or track_id not in tracks.assigned):
            now = ", ".join(str(t) for t in sorted(tracks.present)) or "none"
            raise RequestError(HTTPStatus.NOT_FOUND, f"no track {track_id} in the picture "
                               f"(tracks now: {now}); `livecam ctl status` lists them")
        if (name is not None and track_id not in tracks.assigned
                and tracks.most_assigned >= MAX_TRACK_ASSIGNMENTS):
            raise RequestError(HTTPStatus.CONFLICT, f"at most {MAX_TRACK_ASSIGNMENTS} tracks "
                               "have an identity of their own: clear one first with `livecam "
                               "ctl assign TRACK none` (`livecam ctl status --json` lists "
                               "them under assignments)")
    return cmd.AssignTrack(track_id, name)


def _delay(body: dict[str, Any], names: tuple[str, ...]) -> cmd.Command:
    _fields("/api/delay", body, {"ms": _Field(("number",), required=True)})
    try:
        ms = float(body["ms"])
    except OverflowError:  # an integer beyond float range
        ms = math.inf
    if not 0 <= ms <= MAX_OUTPUT_DELAY_MS:  # also refuses inf (1e999 parses as inf)
        raise _bad(f'/api/delay: "ms" must be between 0 and {MAX_OUTPUT_DELAY_MS:g}')
    return cmd.SetOutputDelay(ms)


def _bare(command: Callable[[], cmd.Command], path: str
          ) -> Callable[[dict[str, Any], tuple[str, ...]], cmd.Command]:
    def build(body: dict[str, Any], names: tuple[str, ...]) -> cmd.Command:
        _fields(path, body, {})
        return command()
    return build


_BUILDERS: dict[str, Callable[[dict[str, Any], tuple[str, ...]], cmd.Command]] = {
    "select": _select,
    "next": _bare(lambda: cmd.StepIdentity(+1), "/api/next"),
    "prev": _bare(lambda: cmd.StepIdentity(-1), "/api/prev"),
    "bypass": _bypass,
    "delay": _delay,
    # the control API waits for (and answers with) how the reload ended
    "reload": _bare(lambda: cmd.Reload(ReloadResult()), "/api/reload"),
    "quit": _bare(cmd.Quit, "/api/quit"),
}


def build_command(verb: str, body: dict[str, Any], *, names: tuple[str, ...],
                  snapshot_path: Callable[[], str], tracks: Tracks | None = None
                  ) -> cmd.Command:
    """The command for ``POST /api/VERB`` with ``body``; ``names`` are the known identities,
    ``snapshot_path`` picks the file a snapshot goes to (clients cannot choose it), ``tracks``
    what an assignment may name (None: not checked). :class:`RequestError`: 404 unknown verb,
    identity or track (an assignment to a track not in the picture; clearing one that has an
    identity works whether its track is there or not), 409 an assignment past
    :data:`~livecam.core.commands.MAX_TRACK_ASSIGNMENTS`, 400 anything else wrong."""
    if verb == "snapshot":
        _fields("/api/snapshot", body, {})
        return cmd.SaveSnapshot(snapshot_path())
    if verb == "assign":
        return _assign(body, names, tracks)
    builder = _BUILDERS.get(verb)
    if builder is None:
        raise RequestError(HTTPStatus.NOT_FOUND, f"no such endpoint: POST /api/{verb}")
    return builder(body, names)

#: Every ``POST /api/VERB``.
VERBS = (*_BUILDERS, "assign", "snapshot")

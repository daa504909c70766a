"""One identity's JSON record (``identities/<name>.json``): read strictly, written atomically.

The record is the only thing that says which photos an identity has, so a damaged one must
never stop the rest of the library working: :func:`read_record` turns anything that is not a
well-formed record (bad JSON, ``[]``, a wrong type, NaN, 100,000 levels of nesting, a huge
file) into one :class:`IdentityError` with a short reason, and the library lists, skips or
removes it. The library writes it with :func:`~livecam.core.files.atomic_write` (temp file,
fsync, rename): a writer killed at any moment leaves the old file or the new one, never a
half-written one.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livecam.core.errors import IdentityError

#: Largest record read, bytes (a record is ~250 bytes per photo).
MAX_RECORD_BYTES = 1 << 20
SHA256_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class IdentityEntry:
    """What the library knows about one identity without loading its textures. ``photos``
    holds dicts with at least ``sha256`` (64 lower-case hex digits)."""

    name: str
    photos: tuple[dict[str, Any], ...]
    created: float
    thumb_path: Path


def _no_constants(text: str) -> float:
    raise ValueError(f"{text} is not a number a record may hold")


def _damaged(name: str, reason: str) -> IdentityError:
    return IdentityError(f"identity {name!r} is damaged ({reason}): remove it with "
                         f"`livecam identity remove {name}` and add it again")


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _check_photo(index: int, photo: Any) -> str | None:
    """Why photo ``index`` of a record is malformed, or None."""
    if not isinstance(photo, dict):
        return f"photo {index} is not an object"
    if not isinstance(photo.get("sha256"), str) or not SHA256_RE.fullmatch(photo["sha256"]):
        return f"photo {index} has no valid sha256"
    for key in ("added", "face_width_px"):
        if key in photo and not _number(photo[key]):
            return f"photo {index}: {key} is not a number"
    if "source" in photo and not isinstance(photo["source"], str):
        return f"photo {index}: source is not text"
    warnings = photo.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        return f"photo {index}: warnings is not a list of text"
    return None


def parse_record(data: bytes, name: str, thumb_path: Path) -> IdentityEntry:
    """The entry a record's bytes describe; :class:`IdentityError` saying why it is damaged."""
    if len(data) > MAX_RECORD_BYTES:
        raise _damaged(name, f"the record is larger than {MAX_RECORD_BYTES >> 20} MiB")
    try:
        meta = json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise _damaged(name, "the record is not UTF-8 text") from None
    except RecursionError:
        raise _damaged(name, "the record nests too deep") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, an int past 4300 digits
        raise _damaged(name, f"not valid JSON: {str(exc)[:80]}") from None
    if not isinstance(meta, dict):
        raise _damaged(name, f"the record is a JSON {type(meta).__name__}, not an object")
    photos = meta.get("photos", [])
    if not isinstance(photos, list):
        raise _damaged(name, "photos is not a list")
    for index, photo in enumerate(photos):
        if (why := _check_photo(index, photo)) is not None:
            raise _damaged(name, why)
    created = meta.get("created", 0.0)
    if not _number(created):
        raise _damaged(name, "created is not a number")
    return IdentityEntry(name=name, photos=tuple(photos), created=float(created),
                         thumb_path=thumb_path)


def read_record(path: Path, name: str) -> IdentityEntry:
    """Read ``path`` (at most :data:`MAX_RECORD_BYTES`); ``FileNotFoundError`` passes through,
    any other problem is an :class:`IdentityError` (see :func:`parse_record`)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _damaged(name, f"cannot be read: {exc.strerror}") from None
    return parse_record(data, name, path.with_suffix(".jpg"))


def record_bytes(name: str, created: float, photos: list[dict[str, Any]]) -> bytes:
    return json.dumps({"name": name, "created": created, "photos": photos}, indent=2,
                      allow_nan=False).encode()

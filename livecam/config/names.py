"""The names a user writes: a few streamer keys at the top, every other key under ``advanced:``.

The schema (:class:`~livecam.config.schema.Config`) keeps one attribute tree (``config.gpu.slots``);
only the names in files and ``--set`` differ: a streamer key keeps its dotted path
(``capture.fps``), every other key is written under ``advanced.`` (``advanced.gpu.slots``).
The old name of an advanced key (``gpu.slots``) still works for one release, with one WARNING
per key and process that names the new one. :func:`to_schema_tree` turns a file's mapping into the
schema's tree; :func:`schema_path` does the same for one ``--set`` key.

Twins, two keys that set one thing, were merged into one key (:data:`MERGED`): the key merged
away is read as the one it joined, with the same WARNING.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from livecam.config.fields import is_derived
from livecam.config.schema import Config
from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

ADVANCED = "advanced"

#: What a streamer sets: input size and rate, the virtual camera, who is swapped and how,
#: the hotkeys and the control API. Everything else is a tuning knob under ``advanced:``.
STREAMER_KEYS: tuple[str, ...] = (
    "capture.width", "capture.height", "capture.fps",
    "output.device", "output.width", "output.height", "output.fps", "output.delay_ms",
    "analysis.max_faces", "analysis.select", "analysis.reference_photos",
    "swap.mode", "swap.model", "swap.enhancer", "swap.keep_mouth", "swap.cover", "swap.assign",
    "swap.hands_in_front",
    "identity.library_dir",
    "control.hotkeys", "control.keys_select", "control.key_next", "control.key_previous",
    "control.key_bypass", "control.api", "control.api_address",
    "engine.backend",
    "logging.level",
    "streams",
)
_STREAMER = frozenset(STREAMER_KEYS)

#: Keys merged into another key that set the same thing (attribute paths: merged away → kept).
#: A file or ``--set`` that names one is read as the kept key, with one warning.
MERGED: dict[str, str] = {
    "gpu.precision": "engine.precision",
    "identity.max_photo_megapixels": "capture.max_image_megapixels",
    "analysis.reference_max_megapixels": "capture.max_image_megapixels",
    "engine.triton_reconnect_initial_s": "capture.reconnect_initial_s",
    "engine.triton_reconnect_max_s": "capture.reconnect_max_s",
    "gpu.colour_blur_px": "swap.colour_blur",
    "engine.compile_if_missing": "engine.build_if_missing",
    "engine.tensorrt_build_if_missing": "engine.build_if_missing",
}

#: The cheek-to-cheek width of a face on inswapper's 128 px crop, px: what
#: ``livecam.swap.align.face_width_on_crop_px("arcface_128", 128)`` says (a test keeps them
#: equal; the config cannot import the swap).
NEURAL_FACE_WIDTH_PX = 75.4


def _colour_blur_from_px(value: Any) -> dict[str, Any]:
    """``gpu.colour_blur_px`` (px on the 128 px crop; 0 = off) as the kept keys: the GPU swap's
    colour match is ``swap.colour: lowfreq`` at ``swap.colour_blur`` face widths."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return {"swap.colour_blur": value}  # the loader says what is wrong with it
    if value <= 0:
        return {}  # off, the default: the generator's colours
    return {"swap.colour": "lowfreq",
            "swap.colour_blur": min(max(value / NEURAL_FACE_WIDTH_PX, 0.02), 1.0)}


#: Merged-away keys in another unit: the kept keys and values that one value sets.
_CONVERTED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "gpu.colour_blur_px": _colour_blur_from_px}


def kept_values(old: str, value: Any) -> dict[str, Any]:
    """What the merged-away key ``old`` (attribute path) set to ``value`` sets now:
    ``{attribute path: value}``."""
    convert = _CONVERTED.get(old)
    return convert(value) if convert is not None else {MERGED[old]: value}


#: Old names already warned about in this process: each warns once, not at every reload.
_WARNED: set[str] = set()


def _fields(cls: Any) -> dict[str, tuple[dataclasses.Field[Any], Any]]:
    hints = typing.get_type_hints(cls)
    return {f.name: (f, hints[f.name]) for f in dataclasses.fields(cls) if not is_derived(f)}


def schema_keys(cls: Any = Config, prefix: str = "") -> Iterator[str]:
    """Every leaf key of the schema as its attribute path (``capture.fps``), in schema order."""
    for name, (_, hint) in _fields(cls).items():
        if dataclasses.is_dataclass(hint):
            yield from schema_keys(hint, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def is_streamer(key: str) -> bool:
    """Whether the attribute path ``key`` is a streamer key (written without ``advanced.``)."""
    return key in _STREAMER


def user_name(key: str) -> str:
    """The name a user writes for attribute path ``key``: the path itself for a streamer key,
    else the path under ``advanced.`` (``advanced.gpu.slots``)."""
    return key if key in _STREAMER else f"{ADVANCED}.{key}"


def _is_leaf(parts: list[str]) -> bool:
    cls: Any = Config
    for i, part in enumerate(parts):
        fields = _fields(cls)
        if part not in fields:
            return False
        hint = fields[part][1]
        if not dataclasses.is_dataclass(hint):
            return i == len(parts) - 1
        cls = hint
    return False


def _warn_old(key: str, new: str | None = None) -> None:
    """One WARNING per process that the user's ``key`` is now ``new`` (an attribute path;
    default: ``key`` under ``advanced.``)."""
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning("config key %s is now %s: the old name works for this release only, "
                    "rename it", key, user_name(key if new is None else new))


def schema_items(parts: list[str], value: Any) -> dict[str, Any]:
    """``{attribute path: value}`` for the user's ``--set`` key ``parts`` and ``value``: one
    entry, or what a merged-away key sets now (:func:`kept_values`, with its warning)."""
    key = ".".join(parts)
    old = key.removeprefix(f"{ADVANCED}.")
    if old in MERGED:
        _warn_old(key, MERGED[old])
        return kept_values(old, value)
    return {".".join(schema_path(parts)): value}


def schema_path(parts: list[str]) -> list[str]:
    """The attribute path for the user's key ``parts`` (from ``--set``): ``advanced.`` taken
    off; an old advanced name warns (once per process).
    Raises :class:`ConfigError` for a streamer key written under ``advanced.``."""
    if parts[0] == ADVANCED:
        rest = parts[1:]
        if not rest:
            raise ConfigError("advanced: give a key under it, e.g. advanced.gpu.slots=4")
        key = ".".join(rest)
        if key in _STREAMER:
            raise ConfigError(f"advanced.{key}: {key} is a streamer key, write it without "
                              "advanced.")
        return rest
    if _is_leaf(parts) and ".".join(parts) not in _STREAMER:
        _warn_old(".".join(parts))
    return parts


def to_schema_tree(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config file's mapping as the schema's tree: the ``advanced:`` section merged into
    the top-level sections, old advanced names kept with one warning each. Unknown keys and
    wrong types pass through for :func:`~livecam.config.loader.build` to report."""
    out = {key: value for key, value in data.items() if key != ADVANCED}
    merged = _take_merged(out, "")
    _warn_tree(out, Config, "")
    if ADVANCED in data:
        advanced = {} if data[ADVANCED] is None else data[ADVANCED]
        if not isinstance(advanced, Mapping):
            raise ConfigError("advanced: expected a mapping of sections (advanced: gpu: slots: 4)")
        advanced = dict(advanced)
        merged += _take_merged(advanced, f"{ADVANCED}.")
        _merge(out, advanced, Config, "")
    for shown, old, value in merged:
        _warn_old(shown, MERGED[old])
        for key, kept in kept_values(old, value).items():
            _put(out, key, kept, shown)
    return out


def _take_merged(tree: dict[str, Any], shown_prefix: str) -> list[tuple[str, str, Any]]:
    """Take the keys merged away (:data:`MERGED`) out of ``tree`` (a file's top level or its
    ``advanced:`` section; sections copied, never changed in place):
    ``(name as written, merged-away key, value)`` each."""
    taken = []
    for old in MERGED:
        section, leaf = old.split(".")
        node = tree.get(section)
        if isinstance(node, Mapping) and leaf in node:
            tree[section] = {k: v for k, v in node.items() if k != leaf}
            taken.append((f"{shown_prefix}{old}", old, node[leaf]))
    return taken


def _put(tree: dict[str, Any], key: str, value: Any, shown: str) -> None:
    """Set attribute path ``key`` in the schema tree ``tree`` to the value a merged-away key
    ``shown`` gave; :class:`ConfigError` when the file sets ``key`` already."""
    *sections, leaf = key.split(".")
    node = tree
    for section in sections:
        child = node.get(section)
        child = {} if child is None else child
        if not isinstance(child, Mapping):
            raise ConfigError(f"{section}: expected a mapping of keys")
        node[section] = node = dict(child)
    if leaf in node:
        raise ConfigError(f"{shown} is {user_name(key)} now, which this file sets already: "
                          f"keep only {user_name(key)}")
    node[leaf] = value


def _warn_tree(node: Mapping[str, Any], cls: Any, prefix: str) -> None:
    fields = _fields(cls)
    for key, value in node.items():
        if key not in fields:
            continue
        hint = fields[key][1]
        if dataclasses.is_dataclass(hint):
            if isinstance(value, Mapping):
                _warn_tree(value, hint, f"{prefix}{key}.")
        elif f"{prefix}{key}" not in _STREAMER:
            _warn_old(f"{prefix}{key}")


def _merge(dst: dict[str, Any], src: Mapping[str, Any], cls: Any, prefix: str) -> None:
    fields = _fields(cls)
    for key, value in src.items():
        shown = f"{ADVANCED}.{prefix}{key}"
        if key not in fields:
            allowed = ", ".join(sorted(fields))
            raise ConfigError(f"{shown}: unknown key (allowed here: {allowed})")
        hint = fields[key][1]
        dotted = f"{prefix}{key}"
        if dataclasses.is_dataclass(hint):
            section = {} if value is None else value
            if not isinstance(section, Mapping):
                raise ConfigError(f"{shown}: expected a mapping of keys")
            mine = {} if dst.get(key) is None else dst[key]
            if not isinstance(mine, Mapping):
                raise ConfigError(f"{dotted}: expected a mapping of keys")
            dst[key] = dict(mine)
            _merge(dst[key], section, hint, dotted + ".")
        elif dotted in _STREAMER:
            raise ConfigError(f"{shown}: {dotted} is a streamer key, write it outside advanced:")
        elif key in dst:
            raise ConfigError(f"{shown} and {dotted} are the same key: keep only {shown}")
        else:
            dst[key] = value

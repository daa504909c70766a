"""Load and validate the config: defaults < ``--config`` file < ``--set key.path=value``.

Validation is strict: an unknown key, a wrong type or an out-of-range value raises
:class:`ConfigError` whose one-line message names the dotted key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from livecam.config.fields import user_fields
from livecam.config.names import schema_items, to_schema_tree, user_name
from livecam.config.safe_yaml import YamlRefused, YamlSyntaxError, load_yaml, read_yaml_file
from livecam.config.schema import Config
from livecam.core.errors import ConfigError

# Error messages show values through this: a bounded repr, so a huge or deeply nested value
# (an alias bomb, a 20,000-deep list) costs a few dozen characters to report, never gigabytes.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 2, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 60, 60, 40


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to about 100 characters whatever its size or depth."""
    try:
        return _SHORT.repr(value)
    except (ValueError, RecursionError):  # e.g. an int past Python's digit limit
        return f"<{type(value).__name__}>"


def _show_key(key: Any) -> str:
    """A key as typed when it is short and printable, else its bounded repr."""
    return key if isinstance(key, str) and key.isprintable() and len(key) <= 60 \
        else short_repr(key)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into (["a", "b", "c"], value), the value parsed as a YAML scalar.

    Text that is not YAML is taken as a plain string (``--set output.device=/dev/video10``);
    YAML that livecam refuses (an alias bomb, 64+ levels of nesting, an unreadable number)
    raises :class:`ConfigError`.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {short_repr(text)}: expected key.path=value, "
                          "e.g. --set capture.fps=60")
    if not raw.strip():
        return key.split("."), ""
    try:
        value = load_yaml(raw)
    except YamlSyntaxError:
        value = raw
    except YamlRefused as exc:
        raise ConfigError(f"--set {_show_key(key)}: the value {exc}") from None
    return key.split("."), value


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (),
                defaults: Sequence[str] = ()) -> Config:
    """Build a :class:`Config` from an optional YAML file and ``key.path=value`` overrides.
    ``defaults`` (``key.path=value`` too): a command's own defaults, which the file and the
    overrides both win over (``livecam daemon`` logs JSON unless either says otherwise)."""
    data: dict[str, Any] = {}
    if path is not None:
        data = to_schema_tree(_read_yaml(Path(path)))
    for text in defaults:
        _set(data, text, keep=True)
    for text in overrides:
        _set(data, text, keep=False)
    return build(Config, data, show=user_name)


def _set(data: dict[str, Any], text: str, *, keep: bool) -> None:
    """Set ``key.path=value`` (a user's name, :mod:`livecam.config.names`) in the schema
    tree ``data`` (``keep``: not where ``data`` has the key)."""
    user_keys, value = parse_override(text)
    for path, kept in schema_items(user_keys, value).items():
        keys = path.split(".")
        node = data
        for part in keys[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{_show_key(path)}: {_show_key(part)} is not a section")
            node = child
        if not (keep and keys[-1] in node):
            node[keys[-1]] = kept


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = read_yaml_file(path)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a folder: give a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except YamlRefused as exc:
        raise ConfigError(f"config file {path} {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
    return loaded


T = typing.TypeVar("T")


def build(cls: type[T], data: Mapping[str, Any], prefix: str = "",
          show: Callable[[str], str] = str) -> T:
    """Construct dataclass ``cls`` from ``data``, validating every key against the schema.
    ``show`` turns a key's attribute path into the name a bad value's error gives it."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping of keys")
    fields = {f.name: f for f in user_fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            allowed = ", ".join(sorted(fields))
            raise ConfigError(f"{prefix}{_show_key(key)}: unknown key (allowed here: {allowed})")
    kwargs: dict[str, Any] = {}
    for name, fld in fields.items():
        if name not in data:
            continue
        dotted = f"{prefix}{name}"
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            section = {} if data[name] is None else data[name]  # `capture:` with nothing under
            kwargs[name] = build(hint, section, dotted + ".", show)  # type: ignore[arg-type]
        else:
            kwargs[name] = _check_value(show(dotted), hint, data[name], fld.metadata)
    return cls(**kwargs)


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if origin in (tuple, list):
        return "a list"
    if origin in (dict, Mapping):
        return "a mapping"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        hint, str(hint)
    )


def _coerce(dotted: str, hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is type(None) and value is None:
                return None
        for arg in typing.get_args(hint):
            if arg is type(None):
                continue
            try:
                return _coerce(dotted, arg, value)
            except ConfigError:
                continue
        raise ConfigError(f"{dotted}: expected {_describe(hint)}, got {short_repr(value)}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{dotted}: expected a list, got {short_repr(value)}")
        args = typing.get_args(hint)
        item_hint = args[0] if args else Any
        items = [
            value_ if item_hint is Any else _coerce(f"{dotted}[{i}]", item_hint, value_)
            for i, value_ in enumerate(value)
        ]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{dotted}: expected a mapping, got {short_repr(value)}")
        key_hint, val_hint = typing.get_args(hint) or (Any, Any)
        return {
            (k if key_hint is Any else _coerce(f"{dotted}.{k}", key_hint, k)):
            (v if val_hint is Any else _coerce(f"{dotted}.{k}", val_hint, v))
            for k, v in value.items()
        }
    if hint is Any:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # NaN passes every range check (all comparisons are false) and inf breaks pacing
            # maths: neither is a setting
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number):
                raise ConfigError(f"{dotted}: {short_repr(value)} is not a finite number")
            return number
    elif hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if value is None or isinstance(value, bool):  # `output: null`, `name: off`
            raise ConfigError(f"{dotted}: expected a string, got {short_repr(value)} "
                              f"({_YAML_WORDS[value is None]}: quote the word, e.g. "
                              f"'{'null' if value is None else 'off'}')")
    raise ConfigError(f"{dotted}: expected {_describe(hint)}, got {short_repr(value)}")


#: What YAML made of a bare word where a string was wanted (by whether it was None)
_YAML_WORDS = {True: "YAML reads null, ~ and an empty value as nothing",
               False: "YAML reads yes, no, on and off as true and false"}


def _check_value(dotted: str, hint: Any, value: Any, meta: Mapping[str, Any]) -> Any:
    value = _coerce(dotted, hint, value)
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        allowed = ", ".join(str(c) for c in choices)
        raise ConfigError(f"{dotted}: {short_repr(value)} is not allowed "
                          f"(choose one of: {allowed})")
    bounds = meta.get("range")
    if bounds is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            lo_s = "-inf" if lo is None else f"{lo:g}"
            hi_s = "inf" if hi is None else f"{hi:g}"
            raise ConfigError(f"{dotted}: {short_repr(value)} is out of range "
                          f"(allowed: {lo_s} to {hi_s})")
    return value

"""Load and validate the config: defaults < ``--config`` file < ``--set key.path=value``.

Validation is strict: an unknown key, a wrong type or an out-of-range value raises
:class:`ConfigError` whose one-line message names the dotted key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from livecam.config.schema import Config
from livecam.core.errors import ConfigError


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into (["a", "b", "c"], value), the value parsed as a YAML scalar."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected key.path=value, e.g. --set capture.fps=60")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """Build a :class:`Config` from an optional YAML file and ``key.path=value`` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_yaml(Path(path))
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for part in keys[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{'.'.join(keys)}: {part} is not a section")
            node = child
        node[keys[-1]] = value
    return build(Config, data)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"config file {path} is not valid YAML{where}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
    return loaded


T = typing.TypeVar("T")


def build(cls: type[T], data: Mapping[str, Any], prefix: str = "") -> T:
    """Construct dataclass ``cls`` from ``data``, validating every key against the schema."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping of keys")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            allowed = ", ".join(sorted(fields))
            raise ConfigError(f"{prefix}{key}: unknown key (allowed here: {allowed})")
    kwargs: dict[str, Any] = {}
    for name, fld in fields.items():
        if name not in data:
            continue
        dotted = f"{prefix}{name}"
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = build(hint, data[name] or {}, dotted + ".")  # type: ignore[arg-type]
        else:
            kwargs[name] = _check_value(dotted, hint, data[name], fld.metadata)
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
        raise ConfigError(f"{dotted}: expected {_describe(hint)}, got {value!r}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{dotted}: expected a list, got {value!r}")
        args = typing.get_args(hint)
        item_hint = args[0] if args else Any
        items = [
            value_ if item_hint is Any else _coerce(f"{dotted}[{i}]", item_hint, value_)
            for i, value_ in enumerate(value)
        ]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{dotted}: expected a mapping, got {value!r}")
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
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    raise ConfigError(f"{dotted}: expected {_describe(hint)}, got {value!r}")


def _check_value(dotted: str, hint: Any, value: Any, meta: Mapping[str, Any]) -> Any:
    value = _coerce(dotted, hint, value)
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        allowed = ", ".join(str(c) for c in choices)
        raise ConfigError(f"{dotted}: {value!r} is not allowed (choose one of: {allowed})")
    bounds = meta.get("range")
    if bounds is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            lo_s = "-inf" if lo is None else f"{lo:g}"
            hi_s = "inf" if hi is None else f"{hi:g}"
            raise ConfigError(f"{dotted}: {value!r} is out of range (allowed: {lo_s} to {hi_s})")
    return value

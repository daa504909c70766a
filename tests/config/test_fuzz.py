"""Fuzzing the config loader and ``--set`` (hypothesis): whatever the text, the result is a
valid :class:`Config` or a one-line :class:`ConfigError` (exit 2 on the command line); never a
traceback, never a hang, never a NaN or infinite setting."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import tempfile
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livecam.cli import main
from livecam.config import Config, load_config
from livecam.core.errors import ConfigError

FUZZ = settings(max_examples=150, deadline=timedelta(seconds=20), database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _dotted_keys(cls: type, prefix: str = "") -> list[str]:
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            keys += _dotted_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


KEYS = _dotted_keys(Config)
SECTIONS = sorted({k.split(".")[0] for k in KEYS})
NAMES = sorted({k.split(".")[-1] for k in KEYS})  # top-level lists (streams) too

scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.integers(min_value=-(10 ** 4200), max_value=10 ** 4200)
           | st.text(max_size=30) | st.sampled_from(["MJPG", "INFO", "neural", "auto", ""]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=8), inner,
                                        max_size=4), max_leaves=25)
documents = st.dictionaries(
    st.sampled_from(SECTIONS) | st.text(max_size=10),
    st.none() | values | st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=10), values,
                                         max_size=6),
    max_size=5)
# text that looks like YAML: the characters with meaning in it, anchors and aliases included
yamlish = st.lists(st.sampled_from([*"ab01 \n:-[]{},&*!|>'\".#%@`?\t\x00\ufeff\u2028é", "&a ", "*a",
                                   "capture:", "  fps: ", ".nan", "<<: "]),
                  max_size=80).map("".join)


def _check(config: Config) -> None:
    """Every float of a loaded config is finite (NaN passed range checks before)."""
    def walk(obj: Any) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value)
            elif isinstance(value, float):
                assert math.isfinite(value), f.name
    walk(config)


def _load_file(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_bytes(content)
        try:
            _check(load_config(path))
        except ConfigError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 1000


@FUZZ
@given(st.text(max_size=300) | yamlish)
def test_any_text_as_a_config_file(text: str) -> None:
    _load_file(text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes_as_a_config_file(data: bytes) -> None:
    _load_file(data)


@FUZZ
@given(documents)
def test_any_structure_as_a_config_file(doc: dict[Any, Any]) -> None:
    _load_file(yaml.safe_dump(doc, allow_unicode=True).encode())


@FUZZ
@given(st.sampled_from(KEYS) | st.text(max_size=20), st.text(max_size=200) | yamlish)
def test_any_set_value(key: str, value: str) -> None:
    try:
        _check(load_config(None, [f"{key}={value}"]))
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000


@FUZZ
@given(st.sampled_from(KEYS), yamlish | st.text(max_size=60))
@pytest.mark.slow
def test_set_on_the_command_line_exits_0_or_2_with_one_line(key: str, value: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
            tempfile.TemporaryDirectory() as tmp:
        try:
            main(["identity", "--set", f"identity.library_dir={tmp}", "--set",
                  f"{key}={value}", "list"])
            code: object = 0
        except SystemExit as exc:
            code = exc.code
    if code != 0:
        assert code == 2, err.getvalue()
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("livecam: error: "), err.getvalue()

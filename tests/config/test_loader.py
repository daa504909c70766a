"""Config loading: defaults, files, --set overrides, and the exit-2 one-line errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from livecam.cli import main
from livecam.config import Config, load_config
from livecam.config.document import render
from livecam.config.fields import user_fields
from livecam.config.loader import build
from livecam.config.names import to_schema_tree, user_name
from livecam.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_defaults_and_overrides() -> None:
    cfg = load_config(
        None, ["capture.fps=60", "output.device=/dev/video10", "advanced.pipeline.realtime=false"]
    )
    assert cfg.capture.fps == 60.0 and isinstance(cfg.capture.fps, float)
    assert cfg.output.device == "/dev/video10"
    assert cfg.pipeline.realtime is False
    assert cfg.capture.width == Config().capture.width
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.capture.fps = 1.0  # type: ignore[misc]


def test_file_then_set(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("capture:\n  width: 640\n  height: 480\n")
    cfg = load_config(path, ["capture.width=800"])
    assert (cfg.capture.width, cfg.capture.height) == (800, 480)


@pytest.mark.parametrize(
    ("override", "pattern"),
    [
        ("capture.bogus=1", r"capture\.bogus: unknown key \(allowed here: .*fps.*\)"),
        ("nosuchsection.x=1", r"nosuchsection: unknown key"),
        ("capture.fps=fast", r"capture\.fps: expected a number, got 'fast'"),
        ("capture.width=12.5", r"capture\.width: expected an integer"),
        ("advanced.pipeline.realtime=3", r"advanced\.pipeline\.realtime: expected true/false"),
        ("capture.fps=1000", r"capture\.fps: 1000\.0 is out of range \(allowed: 1 to 240\)"),
        ("logging.level=LOUD", r"logging\.level: 'LOUD' is not allowed \(choose one of: DEBUG"),
        ("capture", r"--set 'capture': expected key\.path=value"),
    ],
)
def test_bad_values_raise_with_dotted_key(override: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_config(None, [override])


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("capture: [1, 2\n", r"is not valid YAML \(line \d+\)"),
        ("- just\n- a list\n", r"the top level must be a mapping"),
        ("capture:\n  fps: -3\n", r"capture\.fps: -3\.0 is out of range"),
        ("capture: 5\n", r"capture: expected a mapping"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=pattern):
        load_config(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--set", "capture.bogus=1"],
        ["run", "--set", "capture.fps=abc"],
        ["run", "--set", "capture.fps=0"],
        ["run", "--set", "logging.level=LOUD"],
        ["run", "--config", "/nonexistent/livecam.yaml"],
        ["run", "--input", "webcam", "--output", "null"],
        ["run", "--input", "synthetic", "--output", "rtmp://x"],
    ],
)
def test_cli_config_errors_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("livecam: error: ")
    assert "Traceback" not in err


def _yaml_keys(node: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in node.items():
        if isinstance(value, dict) and value and key != "assign":
            keys |= _yaml_keys(value, f"{prefix}{key}.")
        else:
            keys.add(f"{prefix}{key}")
    return keys


def _schema_keys(cls: type, prefix: str = "") -> set[str]:
    keys = set()
    for f in user_fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            keys |= _schema_keys(type(default), f"{prefix}{f.name}.")
        else:
            keys.add(f"{prefix}{f.name}")
    return keys


def test_config_yaml_documents_every_key_with_its_default() -> None:
    text = (REPO / "config.yaml").read_text()
    data = yaml.safe_load(text)
    assert _yaml_keys(data) == {user_name(key) for key in _schema_keys(Config)}
    # loading the documented file gives exactly the built-in defaults
    assert build(Config, to_schema_tree(data)) == Config()
    # and the file is what the schema's help texts render to (no hand edits drifting apart)
    assert text == render(), "regenerate: python -m livecam.config.document > config.yaml"
    # every key carries a comment that explains it, on its line or just above it
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\s+(\w+):\s*(\S.*)?$", line)
        if m and m.group(2) and not m.group(2).startswith("#"):
            above = lines[i - 1].strip()
            assert "#" in line or above.startswith("#"), f"undocumented key: {line!r}"


@pytest.mark.parametrize(("override", "hint"), [
    ("streams=[{input: synthetic, output: null}]", "YAML reads null, ~ and an empty value"),
    ("streams=[{input: synthetic, output: off}]", "YAML reads yes, no, on and off"),
])
def test_a_yaml_word_read_as_nothing_or_a_boolean_says_to_quote_it(override: str,
                                                                    hint: str) -> None:
    """`output: null` meant the null output, `output: off` a name: YAML read them as nothing
    and false; the error said only "expected a string, got None"."""
    with pytest.raises(ConfigError, match="expected a string") as caught:
        load_config(None, [override])
    assert hint in str(caught.value) and "quote" in str(caught.value)

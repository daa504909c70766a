"""Streamer keys at the top, tuning knobs under ``advanced:``; old names warn once and work."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.config import Config, load_config, names
from livecam.config.names import STREAMER_KEYS, schema_keys, user_name
from livecam.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each old name warns once per process: start this test with none warned yet."""
    monkeypatch.setattr(names, "_WARNED", set())


def _renamed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == names.__name__ and r.levelno == logging.WARNING]


def test_a_streamer_meets_at_most_30_keys_all_real() -> None:
    keys = list(schema_keys())
    assert len(STREAMER_KEYS) <= 30
    assert len(set(STREAMER_KEYS)) == len(STREAMER_KEYS)
    assert set(STREAMER_KEYS) <= set(keys)
    assert len(keys) - len(STREAMER_KEYS) > 100  # the rest: under advanced


def test_an_old_name_still_works_and_warns_once_naming_the_new_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, fresh_warnings: None) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("gpu:\n  slots: 4\ncapture:\n  fps: 25\n  loop: false\n")
    caplog.set_level(logging.WARNING)
    cfg = load_config(path, ["gpu.slots=5"])
    assert (cfg.gpu.slots, cfg.capture.fps, cfg.capture.loop) == (5, 25.0, False)
    assert sorted(_renamed(caplog)) == [
        "config key capture.loop is now advanced.capture.loop: the old name works for this "
        "release only, rename it",
        "config key gpu.slots is now advanced.gpu.slots: the old name works for this release "
        "only, rename it"]
    caplog.clear()
    assert load_config(path).gpu.slots == 4  # a reload: works, says nothing again
    assert _renamed(caplog) == []


def test_the_advanced_name_works_silently_and_wins_as_set_later(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, fresh_warnings: None) -> None:
    path = tmp_path / "new.yaml"
    path.write_text("capture:\n  fps: 25\nadvanced:\n  gpu:\n    slots: 4\n  capture:\n"
                    "    loop: false\n")
    caplog.set_level(logging.WARNING)
    cfg = load_config(path)
    assert (cfg.gpu.slots, cfg.capture.fps, cfg.capture.loop) == (4, 25.0, False)
    assert load_config(path, ["advanced.gpu.slots=6"]).gpu.slots == 6
    assert _renamed(caplog) == []


@pytest.mark.parametrize(("text", "sets", "error"), [
    ("advanced:\n  capture:\n    fps: 25\n", [],
     "advanced.capture.fps: capture.fps is a streamer key, write it outside advanced:"),
    ("gpu:\n  slots: 4\nadvanced:\n  gpu:\n    slots: 5\n", [],
     "advanced.gpu.slots and gpu.slots are the same key: keep only advanced.gpu.slots"),
    ("advanced:\n  nope: {}\n", [], "advanced.nope: unknown key"),
    ("advanced: 3\n", [], "advanced: expected a mapping of sections"),
    ("", ["advanced.capture.fps=25"], "advanced.capture.fps: capture.fps is a streamer key"),
    ("", ["advanced.gpu.slots=99"], "advanced.gpu.slots: 99 is out of range"),
])
def test_wrong_use_of_advanced_is_one_clear_error(tmp_path: Path, text: str, sets: list[str],
                                                  error: str, fresh_warnings: None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="^" + re.escape(error)):
        load_config(path, sets)


def test_every_streamer_key_is_in_the_docs_table_and_every_key_has_help() -> None:
    text = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    table = text.split("## The keys a streamer sets", 1)[1].split("\n## ", 1)[0]
    documented = {key for row in re.findall(r"^\| (`.*?) \|", table, flags=re.MULTILINE)
                  for key in re.findall(r"`([\w.]+)`", row)}
    assert documented == set(STREAMER_KEYS)
    config_yaml = (REPO / "config.yaml").read_text(encoding="utf-8")
    for key in schema_keys():
        obj: object = Config()
        *sections, leaf = key.split(".")
        for section in sections:
            obj = getattr(obj, section)
        assert obj.__dataclass_fields__[leaf].metadata["help"], key  # type: ignore[attr-defined]
        assert re.search(rf"^\s*{leaf}:", config_yaml, flags=re.MULTILINE), user_name(key)


def _livecam(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=60)


def test_livecam_config_shows_streamer_keys_and_advanced_on_request() -> None:
    plain = _livecam("config", "--set", "capture.fps=25", "--set", "advanced.gpu.slots=4")
    assert plain.returncode == 0, plain.stderr
    assert re.search(r"^  fps: 25.0$", plain.stdout, flags=re.MULTILINE)
    assert not re.search(r"^advanced:", plain.stdout, flags=re.MULTILINE)
    assert "slots:" not in plain.stdout
    full = _livecam("config", "--advanced", "--set", "advanced.gpu.slots=4")
    assert full.returncode == 0, full.stderr
    assert re.search(r"^advanced:$", full.stdout, flags=re.MULTILINE)
    assert re.search(r"^    slots: 4$", full.stdout, flags=re.MULTILINE)


def test_the_rename_warning_of_a_json_logging_daemon_is_json_too() -> None:
    run = _livecam("config", "--set", "advanced.logging.json=true", "--set", "gpu.slots=4")
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in run.stderr.splitlines()]
    assert [r["msg"] for r in records if r["level"] == "WARNING"] == [
        "config key gpu.slots is now advanced.gpu.slots: the old name works for this release "
        "only, rename it"]

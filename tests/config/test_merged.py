"""Twins merged (issue 43): each pair of keys that set one thing is one key; the key merged away
is still read, as the kept key, with one warning naming it."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest
import yaml

from livecam.config import Config, load_config, names
from livecam.config.document import render
from livecam.config.fields import is_derived
from livecam.config.names import MERGED, NEURAL_FACE_WIDTH_PX, schema_keys, user_name
from livecam.core.errors import ConfigError
from livecam.gpupipe.factory import colour_blur_px
from livecam.swap.align import face_width_on_crop_px


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each old name warns once per process: start this test with none warned yet."""
    monkeypatch.setattr(names, "_WARNED", set())


def _get(config: Config, key: str) -> object:
    node: object = config
    for part in key.split("."):
        node = getattr(node, part)
    return node


#: A value for each kept key that differs from its default (and is in range).
_VALUES = {"engine.precision": "fp32", "capture.max_image_megapixels": 7.5,
           "capture.reconnect_initial_s": 0.125, "capture.reconnect_max_s": 9.0,
           "swap.colour_blur": 0.5, "engine.build_if_missing": True}
#: Merged-away keys read as the kept key with the same value (the colour blur changes unit).
_RENAMED = sorted(old for old in MERGED if old != "gpu.colour_blur_px")


def test_no_twin_is_left_a_key_and_each_kept_key_is_one() -> None:
    keys = set(schema_keys())
    assert not keys & set(MERGED)
    assert set(MERGED.values()) <= keys
    assert set(_VALUES) == set(MERGED.values())
    documented = yaml.safe_load(render())
    advanced = documented.pop("advanced")
    for old in MERGED:
        section, leaf = old.split(".")
        assert leaf not in (documented.get(section) or {}), old
        assert leaf not in (advanced.get(section) or {}), old


@pytest.mark.parametrize("old", _RENAMED)
@pytest.mark.parametrize("where", ["top", "advanced", "set", "set advanced"])
def test_a_merged_away_key_sets_the_kept_one_and_warns_once(
        old: str, where: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        fresh_warnings: None) -> None:
    kept, value = MERGED[old], _VALUES[MERGED[old]]
    section, leaf = old.split(".")
    path = tmp_path / "c.yaml"
    shown = f"advanced.{old}" if "advanced" in where else old
    if where == "top":
        path.write_text(f"{section}:\n  {leaf}: {value}\n")
    elif where == "advanced":
        path.write_text(f"advanced:\n  {section}:\n    {leaf}: {value}\n")
    else:
        path.write_text("")
    caplog.set_level(logging.WARNING)
    config = load_config(path, [f"{shown}={value}"] if where.startswith("set") else [])
    assert _get(config, kept) == value
    assert [r.getMessage() for r in caplog.records if r.name == names.__name__] == [
        f"config key {shown} is now {user_name(kept)}: the old name works for this release "
        "only, rename it"]


def test_each_part_reads_the_one_key_from_its_own_section() -> None:
    config = load_config(None, [f"advanced.{k}={v}" for k, v in _VALUES.items()])
    # the image cap: inputs, identity photos and reference photos
    assert config.capture.max_image_megapixels == 7.5
    assert config.identity.max_photo_megapixels == 7.5
    assert config.analysis.reference_max_megapixels == 7.5
    # the backoff: a lost camera and a failed Triton server
    assert (config.engine.triton_reconnect_initial_s, config.engine.triton_reconnect_max_s) \
        == (0.125, 9.0)
    # one precision: the GPU pipeline's face networks read engine.precision (gpu has none)
    assert config.engine.precision == "fp32"
    assert "precision" not in {f.name for f in dataclasses.fields(config.gpu)}


def test_a_section_built_alone_has_its_knobs_defaults() -> None:
    config = Config()
    for section in dataclasses.fields(config):
        value = getattr(config, section.name)
        if not dataclasses.is_dataclass(value):
            continue
        alone = type(value)()
        for f in dataclasses.fields(value):
            if is_derived(f):
                source = f.metadata["derived_from"].removeprefix("advanced.")
                assert getattr(alone, f.name) == _get(config, source), f"{section.name}.{f.name}"


@pytest.mark.parametrize(("text", "error"), [
    ("identity:\n  max_photo_megapixels: 5\nadvanced:\n  capture:\n"
     "    max_image_megapixels: 6\n",
     "identity.max_photo_megapixels is advanced.capture.max_image_megapixels now, which this "
     "file sets already: keep only advanced.capture.max_image_megapixels"),
    ("identity:\n  max_photo_megapixels: 5\nanalysis:\n  reference_max_megapixels: 6\n",
     "analysis.reference_max_megapixels is advanced.capture.max_image_megapixels now, which"),
    ("advanced:\n  gpu:\n    precision: fp32\n  engine:\n    precision: fp16\n",
     "advanced.gpu.precision is advanced.engine.precision now, which this file sets already"),
])
def test_a_file_that_sets_a_merged_key_twice_is_one_clear_error(
        text: str, error: str, tmp_path: Path, fresh_warnings: None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="^" + re.escape(error)):
        load_config(path)


def test_a_merged_away_key_still_has_its_kept_keys_range(tmp_path: Path,
                                                          fresh_warnings: None) -> None:
    with pytest.raises(ConfigError, match=r"^advanced\.capture\.max_image_megapixels: 0\.0 is "
                                          r"out of range"):
        load_config(None, ["identity.max_photo_megapixels=0"])


def test_one_colour_blur_in_face_widths_serves_the_classic_and_the_gpu_swap(
        caplog: pytest.LogCaptureFixture, fresh_warnings: None) -> None:
    """``gpu.colour_blur_px`` (px on the 128 px crop, 0 = off) was the GPU swap's own blur; it
    is ``swap.colour: lowfreq`` (the maths it runs) at ``swap.colour_blur`` face widths now."""
    assert pytest.approx(face_width_on_crop_px("arcface_128", 128),
                                                 abs=0.05) == NEURAL_FACE_WIDTH_PX
    # the defaults: the GPU swap matches no colour (as insightface), as before
    assert colour_blur_px(Config(), "arcface_128") == 0.0
    caplog.set_level(logging.WARNING)
    old = load_config(None, ["gpu.colour_blur_px=15.08"])
    assert (old.swap.colour, old.swap.colour_blur) == ("lowfreq", pytest.approx(0.2, abs=1e-3))
    # the GPU swap gets the blur the old key gave it
    assert colour_blur_px(old, "arcface_128") == pytest.approx(15.08, abs=0.01)
    assert [r.getMessage() for r in caplog.records if r.name == names.__name__] == [
        "config key gpu.colour_blur_px is now advanced.swap.colour_blur: the old name works "
        "for this release only, rename it"]
    assert load_config(None, ["advanced.gpu.colour_blur_px=0"]) == Config()  # off, as before
    new = load_config(None, ["advanced.swap.colour=lowfreq", "advanced.swap.colour_blur=0.5",
                             "advanced.swap.pixel_boost=256"])
    # face widths: the same share of the face on a pixel-boosted crop twice the size
    assert colour_blur_px(new, "arcface_128") == pytest.approx(0.5 * 2 * NEURAL_FACE_WIDTH_PX,
                                                               abs=0.1)
    lab = load_config(None, ["advanced.swap.colour_blur=0.5"])
    assert colour_blur_px(lab, "arcface_128") == 0.0  # lab: the GPU swap has lowfreq only


def test_the_old_colour_blur_in_a_file_with_its_own_colour_is_one_clear_error(
        tmp_path: Path, fresh_warnings: None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("gpu:\n  colour_blur_px: 20\nadvanced:\n  swap:\n    colour: lab\n")
    with pytest.raises(ConfigError, match=r"^gpu\.colour_blur_px is advanced\.swap\.colour "
                                          r"now, which this file sets already"):
        load_config(path)
    path.write_text("gpu:\n  colour_blur_px: 0\nswap:\n  colour: meanstd\n")
    assert load_config(path).swap.colour == "meanstd"

"""A plain (non-editable) install: the wheel ships the model manifests and tracker settings,
and livecam finds them there, run from another folder (issue 11: `livecam models list` and
neural mode failed after `pip install .`: the manifests were looked up beside the source tree).

.ci/run also installs the wheel with its dependencies into a fresh venv and runs doctor,
models list and the demo; this test is the quick local form of that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

REPO = Path(__file__).resolve().parents[1]
MAPPED = {"livecam.data.engines": "engines", "livecam.data.trackers": "trackers"}

pytestmark = pytest.mark.slow


def test_every_package_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set(find_packages(str(REPO), include=["livecam*"]))
    assert set(config["packages"]) == found | set(MAPPED), \
        "add the new package to [tool.setuptools] packages in pyproject.toml"
    assert config["package-dir"] == MAPPED


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # `pip wheel .` on a copy of the whole checkout (tests, scripts and their device tooling,
    # docs, the lab notes beside the package, as in a clone): building in place would leave
    # build/ and *.egg-info in the checkout
    src = tmp_path_factory.mktemp("src") / "checkout"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".*", "__pycache__", "*.pyc", "build", "dist", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(src)], check=True, timeout=300)
    (built,) = out.glob("livecam-*.whl")
    return built


def test_the_wheel_ships_manifests_trackers_and_the_panel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for manifest in (REPO / "engines").glob("*.yaml"):
        assert f"livecam/data/engines/{manifest.name}" in names
    assert "livecam/data/trackers/bytetrack.yaml" in names
    assert "livecam/control/panel.html" in names
    for module in (REPO / "livecam").rglob("*.py"):
        assert module.relative_to(REPO).as_posix() in names


def test_the_wheel_holds_the_package_only_no_test_helpers_nor_device_tooling(
        wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    outside = [n for n in names if not n.startswith("livecam/") and ".dist-info/" not in n]
    assert not outside, f"the wheel ships files outside the package: {outside[:5]}"
    helpers = [n for n in names if n.startswith(("tests/helpers/", "tests/"))
               or n.endswith("conftest.py") or n.rsplit("/", 1)[-1].startswith("test_")]
    assert not helpers, f"the wheel ships test helpers: {helpers[:5]}"
    tooling = [n for n in names if n.startswith("scripts/") or n.endswith(".sh")
               or "/device/" in n]
    assert not tooling, f"the wheel ships device tooling: {tooling[:5]}"


def test_an_installed_wheel_finds_its_manifests_from_anywhere(wheel: Path,
                                                              tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the installed copy first on the path; its dependencies come from this interpreter
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import livecam, livecam.engines.manifest as m, livecam.track.settings as t; "
            "print(livecam.__file__); print(m.default_manifests_dir()); "
            "print(t.shipped_bytetrack_file())")
    where = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=120, check=True)
    package, manifests, tracker = where.stdout.split()
    assert Path(package).is_relative_to(target)
    assert Path(manifests) == target / "livecam" / "data" / "engines"
    assert Path(tracker).is_file() and Path(tracker).is_relative_to(target)
    listed = subprocess.run([sys.executable, "-m", "livecam.cli", "models", "list"],
                            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    for name in ("inswapper_128", "inswapper_128_fp16", "w600k_r50", "gfpgan_1.4"):
        assert name in listed.stdout


def test_a_checkout_uses_its_own_folders() -> None:
    from livecam.engines.manifest import default_manifests_dir
    from livecam.track.settings import shipped_bytetrack_file

    assert default_manifests_dir() == REPO / "engines"
    assert shipped_bytetrack_file() == REPO / "trackers" / "bytetrack.yaml"

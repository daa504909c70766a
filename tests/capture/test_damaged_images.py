"""An image cut short (a download or copy that did not finish), or a JPEG with a damaged scan,
given as a photo or an ``image:`` input: livecam's one line, and no line of libjpeg's, libpng's
or OpenCV's.

Before: OpenCV's libjpeg printed "Premature end of JPEG file" or "Corrupt JPEG data: ..."
straight to the process's stderr (fd 2, below Python's logging and OpenCV's log level), and
``--input image:`` of a cut-short JPEG ran on with its missing part filled in grey; a PNG cut
short brought "libpng error: Read Error", a BMP an OpenCV "[ERROR:0@...]" line. Run as the
user runs it: a subprocess, whose stderr is all its writers'.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def livecam(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, errors="replace", timeout=120, env=env)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray
          ) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("images")
    whole = cv2.imencode(".jpg", astronaut_bgr)[1].tobytes()
    damaged = bytearray(whole)
    middle = len(whole) // 2
    damaged[middle:middle + 8] = b"\xff\xd9" * 4  # end-of-image markers inside the scan
    png = cv2.imencode(".png", astronaut_bgr)[1].tobytes()
    bmp = cv2.imencode(".bmp", astronaut_bgr)[1].tobytes()
    files = {"half.jpg": whole[:len(whole) // 2], "no_end.jpg": whole[:-2],
             "damaged.jpg": bytes(damaged), "half.png": png[:len(png) // 2],
             "half.bmp": bmp[:len(bmp) // 2]}
    paths = {}
    for name, data in files.items():
        paths[name] = folder / name
        paths[name].write_bytes(data)
    return paths


def _commands(photo: Path, library: Path) -> dict[str, list[str]]:
    return {
        "identity add": ["identity", "--set", f"identity.library_dir={library}", "add", "x",
                         str(photo)],
        "image input": ["run", "--input", f"image:{photo}", "--output", "null", "--frames",
                        "1"],
    }


@pytest.mark.parametrize("command", ["identity add", "image input"])
@pytest.mark.parametrize("cut", ["half.jpg", "no_end.jpg", "half.png", "half.bmp"])
def test_an_image_cut_short_is_one_line_of_livecam_alone(
        tmp_path: Path, images: dict[str, Path], command: str, cut: str) -> None:
    result = livecam(*_commands(images[cut], tmp_path / "lib")[command])
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("livecam: error: ") and str(images[cut]) in lines[0]
    assert "cut short" in lines[0], lines[0]


@pytest.mark.parametrize("command", ["identity add", "image input"])
def test_a_jpeg_with_a_damaged_scan_brings_no_libjpeg_line(
        tmp_path: Path, images: dict[str, Path], command: str) -> None:
    """Decoded as far as it goes, as before (whether the picture is of use is the command's
    own check): only libjpeg's line is gone."""
    result = livecam(*_commands(images["damaged.jpg"], tmp_path / "lib")[command])
    assert "JPEG" not in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    if command == "image input":
        assert result.returncode == 0, result.stderr[-3000:]

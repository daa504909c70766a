"""``analysis.select: reference`` photos read as `livecam analyze` reads them (a subprocess, the
real decoders): a damaged or oversized photo is one line, never a half-grey reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np


def analyze_with_reference(tmp_path: Path, photo: Path, *sets: str
                           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "livecam.cli", "analyze", "--input", "synthetic:160x120",
         "--json", str(tmp_path / "o.json"), "--set", "analysis.select=reference",
         "--set", f"analysis.reference_photos=[{photo}]", *sets],
        capture_output=True, text=True, timeout=180)


def test_a_reference_photo_cut_short_is_refused_in_one_line(
        tmp_path: Path, astronaut_bgr: np.ndarray) -> None:
    """Before: libjpeg's "Premature end of JPEG file", then the half-grey photo was taken as
    the reference and the analysis ran (exit 0)."""
    ok, jpeg = cv2.imencode(".jpg", astronaut_bgr)
    assert ok
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(jpeg.tobytes()[: len(jpeg) // 2])
    run = analyze_with_reference(tmp_path, cut)
    assert run.returncode != 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"livecam: error: reference photo {cut}"), \
        run.stderr
    assert not (tmp_path / "o.json").exists()


def test_a_reference_photo_over_the_size_limit_is_refused_before_decoding(
        tmp_path: Path) -> None:
    """A 20000x20000 PNG of a few hundred kB was decoded whole (1.2 GB) before anything
    checked its size; its header now says it is too large."""
    big = tmp_path / "big.png"
    ok, png = cv2.imencode(".png", np.zeros((20000, 20000), np.uint8),
                           [cv2.IMWRITE_PNG_COMPRESSION, 9])
    assert ok
    big.write_bytes(png.tobytes())
    run = analyze_with_reference(tmp_path, big, "--set",
                                 "advanced.capture.max_image_megapixels=50")
    assert run.returncode != 0, run.stderr
    assert "above advanced.capture.max_image_megapixels=50" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr

"""The first frames of a live run (issue 39 item 9): the output started with 12-17 black
frames while the stages warmed up on the first face, and a file input then lost its first
~0.7 s (frame 0 was followed by frame 16-22: the frames behind it were dropped while it was
processed). Now the first frame sent is the input's first, and the frames right behind it
follow. Run as a user runs it: `livecam run` with a real face in a file, paced live.

Which frame follows frame 0 here depends on the host's speed as well (a frame slower than
33 ms is rightly dropped as late: a clean-clone CI got frame 3 with the fix in place), so the
waiting itself is judged by event in `tests/capture/test_thread.py`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.daemon.conftest import write_clip

pytestmark = pytest.mark.slow

N_FRAMES = 40
BAND_PX = 40  # a band at the left whose grey level numbers the frame


def _band_level(k: int) -> int:
    return 40 + 5 * k


def _clip(path: Path) -> Path:
    """A real face (insightface's t1) beside a band numbering each frame."""
    from insightface.data import get_image

    face = cv2.resize(np.ascontiguousarray(get_image("t1")[180:500, 0:260]), (240, 296))[:240]
    frames = []
    for k in range(N_FRAMES):
        image = np.zeros((240, 320, 3), np.uint8)
        image[:, 80:] = face
        image[:, :BAND_PX] = _band_level(k)
        frames.append(image)
    return write_clip(path, frames)


def _levels(path: Path) -> list[float]:
    import av

    with av.open(str(path)) as container:
        return [float(f.to_ndarray(format="bgr24")[8:-8, 4:BAND_PX - 4].mean())
                for f in container.decode(video=0)]


def _numbers(out: Path, clip: Path) -> list[int]:
    """The input frame number of every output frame (-1: a black frame), matched by the
    band's level to the input frames as decoded (what livecam read)."""
    inputs = np.array(_levels(clip))
    return [-1 if level < 20 else int(np.argmin(np.abs(inputs - level)))
            for level in _levels(out)]


def test_a_live_run_starts_with_the_first_input_frame(tmp_path: Path,
                                                      astronaut_bgr: np.ndarray) -> None:
    clip = _clip(tmp_path / "face.mp4")
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)
    out = tmp_path / "out.mp4"
    run = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", f"file:{clip}", "--output",
         f"file:{out}", "--source", str(photo), "--set", "advanced.pipeline.realtime=true",
         "--set", "advanced.capture.loop=false", "--set", "control.api=false",
         "--set", "control.hotkeys=false", "--set", "advanced.output.file_crf=10"],
        capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    numbers = _numbers(out, clip)
    assert numbers[0] == 0, numbers[:30]  # not a black frame: the input's first
    assert -1 not in numbers, numbers[:30]
    # the frames behind frame 0 are not dropped while it is processed (before: frame 16-22
    # came next, when the models warmed up on it); a loaded host may still drop a few as late
    first_new = next(n for n in numbers if n != 0)
    assert first_new <= 8, numbers[:30]

"""The daemon as a subprocess, driven by `livecam ctl`, judged by the frames it sends.

Input is a real photo (`image:`), output the production virtual-camera path with the recording
backend from ``plugin/`` (no v4l2loopback on CI). Identities are real people from installed
packages, added to the daemon's own library.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import cv2
import numpy as np
import pytest

from tests.daemon.conftest import Daemon

pytestmark = pytest.mark.slow


def face_box(image_bgr: np.ndarray) -> tuple[int, int, int, int]:
    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(image_bgr)
    x1, y1, x2, y2 = faces.boxes_xyxy[0].astype(int)
    return int(x1), int(y1), int(x2), int(y2)


def region_diff(a: np.ndarray, b: np.ndarray, box: tuple[int, int, int, int]) -> float:
    x1, y1, x2, y2 = box
    return float(np.abs(a[y1:y2, x1:x2].astype(np.int16) - b[y1:y2, x1:x2]).mean())


def first_changed(frames: np.ndarray, start: int, reference: np.ndarray,
                  box: tuple[int, int, int, int], *, changed: bool, threshold: float) -> int:
    """Frames after ``start`` until the face region differs from (or equals) ``reference``."""
    for k in range(start, len(frames)):
        diff = region_diff(frames[k], reference, box)
        if (diff > threshold) == changed:
            return k - start
    raise AssertionError("the output never changed as asked")


def select(d: Daemon, *args: str) -> int:
    reply = json.loads(d.ctl("--json", *args).stdout)
    assert reply["applied"] is True
    return int(reply["frames_sent_at_apply"])


def wait_frames(d: Daemon, n: int, timeout_s: float = 20) -> np.ndarray:
    t0 = time.monotonic()
    while len(frames := d.frames()) < n:
        assert time.monotonic() - t0 < timeout_s, f"only {len(frames)} frames after {timeout_s} s"
        time.sleep(0.1)
    return frames


def test_select_and_bypass_show_in_the_output_within_two_frames(
        new_daemon: Callable[[], Daemon], astronaut_bgr: np.ndarray) -> None:
    from insightface.data import get_image

    from livecam.identity.library import IdentityLibrary

    t1 = get_image("t1")
    d = new_daemon()
    # the live "camera": one real person from t1, at webcam-like size
    target = cv2.resize(np.ascontiguousarray(t1[0:443, 0:640]), (640, 442))[:440]
    photo_in = d.root / "webcam.png"
    cv2.imwrite(str(photo_in), target)
    box = face_box(target)
    library = IdentityLibrary(d.root / "data" / "livecam" / "identities")
    astro = d.root / "astronaut.png"
    cv2.imwrite(str(astro), astronaut_bgr)
    library.add("astro", [astro], force=True)
    other = d.root / "other.png"
    cv2.imwrite(str(other), np.ascontiguousarray(t1[0:443, 640:1280]))
    library.add("other", [other], force=True)

    d.start("--input", f"image:{photo_in}", "--output", "virtualcam", "--set",
            "output.backend=recording", "--set", "capture.fps=15")
    d.wait_ready(min_frames=10)
    lag = {}
    at = select(d, "select", "astro")
    frames = wait_frames(d, at + 8)
    assert region_diff(frames[at - 1], target, box) < 1.0  # unswapped before the command
    lag["select"] = first_changed(frames, at, target, box, changed=True, threshold=6.0)
    astro_face = frames[at + 6]

    at = select(d, "select", "other")
    frames = wait_frames(d, at + 8)
    lag["switch"] = first_changed(frames, at, astro_face, box, changed=True, threshold=6.0)

    at = select(d, "bypass", "on")
    frames = wait_frames(d, at + 8)
    lag["bypass"] = first_changed(frames, at, target, box, changed=False, threshold=1.0)
    print(f"frames sent after the command applied before it showed: {lag}")
    assert all(v <= 2 for v in lag.values()), lag
    # bypass sends the camera's frame itself
    assert np.array_equal(frames[at + 4], target)

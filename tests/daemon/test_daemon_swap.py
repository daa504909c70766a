"""The daemon as a subprocess, driven by `livecam ctl`, judged by the frames it sends.

Input is a ``file:`` clip of a real photo whose frames carry their own index (a frame code in a
corner, see tests/control/switch_judge.py), output the production virtual-camera path with the
recording backend from ``plugin/`` (no v4l2loopback on CI). Identities are real people from
installed packages, added to the daemon's own library.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.control import switch_judge
from tests.control.switch_judge import REAL, Applied, SentFrames, SentWatcher
from tests.daemon.conftest import Daemon

pytestmark = pytest.mark.slow

THREADS = 2  # advanced.pipeline.threads (the default), named for the in-flight bound


class Recorded(SentWatcher):
    """Reads the frames the daemon's recording camera appended to its file since the last
    call and adds them to ``sent`` (whole frames only: the daemon may be mid-write)."""

    poll_s = 0.1

    def __init__(self, d: Daemon, sent: SentFrames) -> None:
        super().__init__(sent)
        self._d, self._offset = d, 0

    def poll(self) -> None:
        assert self._d.record_dir is not None
        meta_path = self._d.record_dir / "meta.json"
        if not meta_path.exists():
            return
        meta = json.loads(meta_path.read_text())
        size = meta["width"] * meta["height"] * 3
        with open(self._d.record_dir / "frames.raw", "rb") as f:
            f.seek(self._offset)
            data = f.read()
        n = len(data) // size
        frames = np.frombuffer(data[:n * size], np.uint8).reshape(n, meta["height"],
                                                                 meta["width"], 3)
        for frame in frames:
            self.sent.add(frame)
        self._offset += n * size

    def context(self) -> str:
        return f"; {self._d.stderr()[-2000:]}"


def command(d: Daemon, look: str, *args: str) -> Applied:
    reply = json.loads(d.ctl("--json", *args).stdout)
    assert reply["applied"] is True
    return Applied(look, int(reply["frames_sent_at_apply"]), int(reply["first_frame_index"]))


@pytest.fixture(scope="module")
def webcam(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, Path]:
    """One real person from insightface's t1 at webcam size, and its coded clip."""
    from insightface.data import get_image

    t1 = get_image("t1")
    base = np.ascontiguousarray(cv2.resize(t1[0:443, 0:640], (640, 442))[:440])
    clip = tmp_path_factory.mktemp("clip") / "webcam.mp4"
    return base, switch_judge.write_clip(clip, base)


def test_select_and_bypass_apply_from_the_first_frame_under_the_new_state(
        new_daemon: Callable[[], Daemon], webcam: tuple[np.ndarray, Path]) -> None:
    from insightface.data import get_image
    from skimage import data

    from livecam.analysis.photo import analyze_photo
    from livecam.identity.library import IdentityLibrary

    base, clip = webcam
    d = new_daemon()
    t1 = get_image("t1")
    library = IdentityLibrary(d.root / "data" / "livecam" / "identities")
    for name, photo_bgr in (("astro", data.astronaut()[:, :, ::-1]),
                            ("other", t1[204:485, 1031:1280])):  # a frontal face
        photo = d.root / f"{name}.png"
        cv2.imwrite(str(photo), np.ascontiguousarray(photo_bgr))
        library.add(name, [photo], force=True)
    x1, y1, x2, y2 = analyze_photo(base).boxes_xyxy[0].astype(int)
    sent = SentFrames(base, (int(x1), int(y1), int(x2), int(y2)))
    recorded = Recorded(d, sent)

    d.start("--input", f"file:{clip}", "--output", "virtualcam", "--set",
            "advanced.output.backend=recording", "--set", f"advanced.pipeline.threads={THREADS}")
    d.wait_ready(min_frames=10)
    recorded.wait_for_index(0)
    # live analysis detects off the frame's path: judge switches once the face is tracked
    deadline = time.monotonic() + 180
    while not d.status()["tracks"]:
        assert time.monotonic() < deadline, "the face in the clip was never tracked"
        time.sleep(0.2)
    applied = []
    # no --identity: the daemon starts with the library's first identity (astro)
    for look, args in (("other", ("select", "other")), ("astro", ("select", "astro")),
                       (REAL, ("bypass", "on"))):
        applied.append(command(d, look, *args))
        # frames captured under the new state were sent showing it (after the cover while a
        # new identity loads, which takes time, not frames): enough to judge by
        recorded.wait_shown(applied[-1])
    report = switch_judge.judge(sent, applied, initial="astro", threads=THREADS)
    print(f"commands {applied}: {report}")

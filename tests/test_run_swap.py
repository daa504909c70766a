"""`livecam run` end to end with a face swap: real photos, real MediaPipe, real H.264 files.

Runs the installed command in a subprocess with the user data/config dirs pointed at a temporary
folder (so nothing touches the real home) and the control API off (tests must not open ports
they do not test).
"""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from tests.helpers.clips import Trajectory, face_sprites, make_clip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clip_and_truth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    from insightface.data import get_image

    sprites = face_sprites(get_image("t1"))
    frames, truth = make_clip(sprites[:1], [Trajectory.linear((260, 240), (380, 240), 12, 150)],
                              size=(640, 480))
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(15))
        stream.width, stream.height = 640, 480
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "12"}
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path, truth


def livecam(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"),
               XDG_CACHE_HOME=str(tmp / "cache"), XDG_STATE_HOME=str(tmp / "state"))
    return subprocess.run([sys.executable, "-m", "livecam.cli", *args], capture_output=True,
                          text=True, timeout=240, env=env)


OFFLINE = ["--set", "advanced.pipeline.realtime=false", "--set", "advanced.capture.loop=false",
           "--set",
           "control.api=false", "--set", "control.hotkeys=false", "--set",
           "advanced.pipeline.status_interval_s=0", "--set", "advanced.output.file_crf=10"]


def decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def face_change(inp: np.ndarray, out: np.ndarray, box: np.ndarray) -> tuple[float, float]:
    """Mean absolute change inside the face box, and outside a margin around it."""
    x1, y1, x2, y2 = box.astype(int)
    diff = np.abs(inp.astype(np.int16) - out.astype(np.int16)).mean(axis=2)
    inside = diff[y1:y2, x1:x2].mean()
    mask = np.ones(diff.shape, bool)
    pad = int(0.5 * (x2 - x1))
    mask[max(0, y1 - pad):y2 + pad, max(0, x1 - pad):x2 + pad] = False
    return float(inside), float(diff[mask].mean())


def test_run_with_source_photo_swaps_the_face(tmp_path: Path, clip_and_truth: tuple[Path, list],
                                              astronaut_bgr: np.ndarray) -> None:
    clip, truth = clip_and_truth
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)
    out = tmp_path / "out.mp4"
    result = livecam(tmp_path, "run", "--input", f"file:{clip}", "--output", f"file:{out}",
                     "--source", str(photo), "--frames", "12", *OFFLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    inputs, outputs = decode(clip), decode(out)
    assert len(outputs) == 12
    for k in (3, 8):
        inside, outside = face_change(inputs[k], outputs[k], truth[k].boxes_xyxy[0])
        assert inside > 8.0, f"frame {k}: face barely changed ({inside:.1f})"
        assert outside < 2.5, f"frame {k}: picture outside the face changed ({outside:.1f})"


def test_library_identity_then_run_by_name(tmp_path: Path, clip_and_truth: tuple[Path, list],
                                           astronaut_bgr: np.ndarray) -> None:
    clip, truth = clip_and_truth
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)
    # the astronaut face is 93 px wide: under the quality bar, so it needs --force
    added = livecam(tmp_path, "identity", "add", "eileen", str(photo), "--force")
    assert added.returncode == 0, added.stderr[-2000:]
    out = tmp_path / "named.mp4"
    result = livecam(tmp_path, "run", "--input", f"file:{clip}", "--output", f"file:{out}",
                     "--identity", "eileen", "--frames", "6", *OFFLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    inside, _ = face_change(decode(clip)[4], decode(out)[4], truth[4].boxes_xyxy[0])
    assert inside > 8.0
    # no identity chosen: the one last used with this library is, and the log says so (a
    # forgotten --identity must not send the real face)
    out2 = tmp_path / "plain.mp4"
    result = livecam(tmp_path, "run", "--input", f"file:{clip}", "--output", f"file:{out2}",
                     "--frames", "6", *OFFLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no --identity given: using 'eileen'" in result.stderr, result.stderr[-2000:]
    inside, _ = face_change(decode(clip)[4], decode(out2)[4], truth[4].boxes_xyxy[0])
    assert inside > 8.0


def test_unknown_identity_and_bad_source_are_one_line_errors(tmp_path: Path) -> None:
    result = livecam(tmp_path, "run", "--input", "synthetic", "--output", "null", "--identity",
                     "nobody", *OFFLINE)
    assert result.returncode == 2 and "livecam identity add nobody" in result.stderr
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"nope")
    result = livecam(tmp_path, "run", "--input", "synthetic", "--output", "null", "--source",
                     str(junk), *OFFLINE)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len([ln for ln in result.stderr.splitlines() if ln.startswith("livecam: error")]) == 1

"""Frame sources: synthetic pattern, video files (real H.264 via PyAV), still images, specs."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from livecam.capture import make_source, parse_input
from livecam.config.schema import CaptureConfig
from livecam.core.errors import CaptureError, UsageError


def write_h264(path: Path, frames: list[np.ndarray], fps: int = 30) -> None:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps))
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def test_synthetic_moves_and_has_the_asked_size() -> None:
    src = make_source(parse_input("synthetic:320x240"), CaptureConfig())
    src.open()
    a, b = src.read(), src.read()
    assert a is not None and b is not None
    assert a.shape == (240, 320, 3) and a.dtype == np.uint8
    assert np.abs(a.astype(int) - b.astype(int)).mean() > 1.0  # it moves
    assert not a.flags.writeable  # stages cannot write into captured frames
    assert src.size_px == (320, 240)


def test_file_source_reads_every_frame_then_ends(tmp_path: Path, astronaut_bgr: np.ndarray) -> None:
    frames = [np.roll(astronaut_bgr[:256, :320], 8 * i, axis=1) for i in range(12)]
    path = tmp_path / "clip.mp4"
    write_h264(path, frames, fps=25)
    src = make_source(parse_input(f"file:{path}"), CaptureConfig())
    src.open()
    assert src.size_px == (320, 256)
    assert src.fps == pytest.approx(25.0)
    got = []
    while (image := src.read()) is not None:
        got.append(image)
    assert len(got) == 12
    # lossy codec, same picture
    assert np.abs(got[5].astype(int) - frames[5].astype(int)).mean() < 6


def test_image_source(tmp_path: Path, astronaut_bgr: np.ndarray) -> None:
    path = tmp_path / "a.png"
    cv2.imwrite(str(path), astronaut_bgr)
    src = make_source(parse_input(f"image:{path}"), CaptureConfig(fps=15.0))
    src.open()
    image = src.read()
    assert image is not None and np.array_equal(image, astronaut_bgr)
    assert src.read() is image  # same frame again, never copied
    assert src.fps == 15.0


def test_the_gpu_benchmarks_clip_is_a_new_frame_each_time(
        tmp_path: Path, astronaut_bgr: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/bench_gpu.py reads its scene as this clip, as from a camera: every frame a new
    array holding the scene moved along a small circle, exactly (raw video: no codec loss).
    Its ``image:`` input handed the same array again, and the GPU follower uploaded and
    searched that only once (device run 66), so the benchmark left out each frame's upload."""
    import importlib.util

    # scripts/ is no package on sys.path (`pytest` as README runs it): load the file itself
    spec = importlib.util.spec_from_file_location(
        "bench_gpu_scenes", Path(__file__).parents[2] / "scripts" / "bench_gpu_scenes.py")
    assert spec is not None and spec.loader is not None
    scenes = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, scenes)  # its dataclasses look it up there
    spec.loader.exec_module(scenes)
    CLIP_FRAMES, CLIP_SWAY_PX, write_clip = (scenes.CLIP_FRAMES, scenes.CLIP_SWAY_PX,
                                             scenes.write_clip)

    scene = cv2.resize(astronaut_bgr, (192, 108))
    src = make_source(parse_input(f"file:{write_clip(scene, tmp_path / 'c.nut')}"),
                      CaptureConfig())
    src.open()
    frames = [src.read() for _ in range(CLIP_FRAMES)]
    assert src.read() is None  # the capture thread starts it again (advanced.capture.loop)
    assert src.fps == 30.0
    for k, frame in enumerate(frames):
        angle = 2 * np.pi * k / CLIP_FRAMES
        shift = np.array([[1, 0, CLIP_SWAY_PX * np.cos(angle)],
                          [0, 1, CLIP_SWAY_PX * np.sin(angle)]], np.float32)
        expected = cv2.warpAffine(scene, shift, (192, 108), flags=cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REFLECT)
        assert frame is not None and np.array_equal(frame, expected), k
    first, half = frames[0], frames[CLIP_FRAMES // 2]
    assert first is not None and half is not None and not np.array_equal(first, half)  # moves


@pytest.mark.parametrize("kind", ["file", "image"])
def test_missing_or_broken_files_say_so(tmp_path: Path, kind: str) -> None:
    with pytest.raises(CaptureError, match="does not exist"):
        make_source(parse_input(f"{kind}:{tmp_path}/nope"), CaptureConfig()).open()
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a picture or a video" * 10)
    with pytest.raises(CaptureError, match=r"cannot be decoded|not a video"):
        make_source(parse_input(f"{kind}:{junk}"), CaptureConfig()).open()


@pytest.mark.parametrize("spec", ["webcam", "camera:", "file:", "synthetic:12", "synthetic:1x1"])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(UsageError, match="--input"):
        make_source(parse_input(spec), CaptureConfig())


def test_camera_spec_parses_index_and_path() -> None:
    assert parse_input("camera:0").target == "0"
    assert parse_input("camera:/dev/video2").target == "/dev/video2"


def test_missing_camera_is_a_clear_error() -> None:
    # No camera exists on CI machines, so opening one must fail with advice, not hang or crash.
    src = make_source(parse_input("camera:/dev/video-livecam-none"), CaptureConfig())
    with pytest.raises(CaptureError, match="livecam doctor"):
        src.open()

"""Inputs a careless user gives (issue 11): a non-looping file in live mode, a photo as a
video, a pipe, broken media, huge images. Each ends cleanly or is one line with exit 2.

Run through the command a user runs (subprocesses: FFmpeg and OpenCV write to the process's
stderr, which only a subprocess captures).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from livecam.capture import make_source, parse_input
from livecam.config.schema import CaptureConfig
from livecam.core.errors import CaptureError, UsageError
from tests.capture.bigimage import write_big_hdr, write_big_png

N_FRAMES = 24


def livecam(*args: str, stdin: bytes | None = None,
            timeout: float = 90) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "livecam.cli", *args], input=stdin,
                            capture_output=True, timeout=timeout)
    return subprocess.CompletedProcess(result.args, result.returncode,
                                       result.stdout.decode(errors="replace"),
                                       result.stderr.decode(errors="replace"))


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("livecam: error: "), result.stderr[-3000:]
    return lines[0]


def frames_sent(stderr: str) -> int:
    match = re.search(r"done: .*\bsent (\d+) frames", stderr)
    assert match, stderr[-3000:]
    return int(match.group(1))


def write_clip(path: Path, photo_bgr: np.ndarray, fmt: str | None = None) -> Path:
    with av.open(str(path), "w", format=fmt) as container:
        stream = container.add_stream("libx264", rate=Fraction(30))
        stream.width, stream.height, stream.pix_fmt = 320, 256, "yuv420p"
        for i in range(N_FRAMES):
            image = np.ascontiguousarray(np.roll(photo_bgr[:256, :320], 8 * i, axis=1))
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray) -> Path:
    root = tmp_path_factory.mktemp("media")
    write_clip(root / "clip.mp4", astronaut_bgr)
    write_clip(root / "clip.ts", astronaut_bgr, fmt="mpegts")
    cv2.imwrite(str(root / "photo.jpg"), astronaut_bgr)
    (root / "junk.mp4").write_bytes(b"not a video at all " * 40)
    (root / "cut.mp4").write_bytes((root / "clip.mp4").read_bytes()[:3000])
    write_big_png(root / "huge_20k.png", 20000, 20000)
    write_big_png(root / "huge_40k.png", 40000, 40000)
    write_big_hdr(root / "huge_12k.hdr", 12000, 12000)
    return root


def test_file_without_loop_ends_in_live_mode(media: Path) -> None:
    # before: the output repeated the last frame until Ctrl-C (`run --help` says it stops)
    result = livecam("run", "--input", f"file:{media / 'clip.mp4'}", "--output", "null",
                     "--set", "advanced.capture.loop=false", "--set",
                     "advanced.pipeline.realtime=true")
    assert result.returncode == 0, result.stderr[-3000:]
    sent = frames_sent(result.stderr)
    assert 1 <= sent <= N_FRAMES + 3, result.stderr[-3000:]  # + a few paced repeats at most


def test_a_photo_as_a_file_input_says_to_use_image(media: Path) -> None:
    line = one_error_line(livecam("run", "--input", f"file:{media / 'photo.jpg'}", "--output",
                                  "null", "--frames", "5"))
    assert f"use --input image:{media / 'photo.jpg'}" in line


@pytest.mark.parametrize("name", ["junk.mp4", "cut.mp4"])
def test_broken_media_is_one_line_exit_2(media: Path, name: str) -> None:
    line = one_error_line(livecam("run", "--input", f"file:{media / name}", "--output", "null",
                                  "--frames", "5"))
    assert "is not a video livecam can decode" in line


def test_stdin_pipe_is_a_file_input(media: Path) -> None:
    # advanced.capture.loop is on by default: a pipe cannot restart, so the run ends with the stream
    result = livecam("run", "--input", "file:/dev/stdin", "--output", "null",
                     stdin=(media / "clip.ts").read_bytes())
    assert result.returncode == 0, result.stderr[-3000:]
    assert 1 <= frames_sent(result.stderr) <= N_FRAMES + 3
    assert "Traceback" not in result.stderr


def test_fifo_is_a_file_input(media: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "live.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as out:  # blocks until the reader opens it
            out.write((media / "clip.ts").read_bytes())

    from livecam.core.errors import InputError

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    source = make_source(parse_input(f"file:{fifo}"), CaptureConfig())
    source.open()
    frames = []
    while (image := source.read()) is not None:
        frames.append(image)
    source.close()
    writer.join(timeout=30)
    assert len(frames) == N_FRAMES and frames[0].shape == (256, 320, 3)
    with pytest.raises(InputError, match="pipe that has ended"):
        source.open()  # a pipe is read once: no silent wait for a writer that never comes


def test_file_source_reads_like_before(media: Path, astronaut_bgr: np.ndarray) -> None:
    source = make_source(parse_input(f"file:{media / 'clip.mp4'}"), CaptureConfig())
    source.open()
    assert source.size_px == (320, 256) and source.fps == pytest.approx(30.0)
    frames = []
    while (image := source.read()) is not None:
        frames.append(image)
    assert len(frames) == N_FRAMES
    expected = np.roll(astronaut_bgr[:256, :320], 8 * 5, axis=1)
    assert np.abs(frames[5].astype(int) - expected.astype(int)).mean() < 6
    assert not frames[5].flags.writeable
    source.close()
    source.open()  # files restart (advanced.capture.loop)
    assert source.read() is not None


@pytest.mark.parametrize("name", ["huge_20k.png", "huge_40k.png"])
def test_huge_image_input_is_refused_before_decoding(media: Path, name: str) -> None:
    # before: 20000x20000 was decoded (2.65 GB peak); 40000x40000 was a cv2.error traceback
    line = one_error_line(livecam("run", "--input", f"image:{media / name}", "--output", "null",
                                  "--frames", "3"))
    assert "megapixels, above advanced.capture.max_image_megapixels=100" in line


def test_huge_image_is_refused_without_calling_the_decoder(
        media: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before, a Radiance HDR (a format Pillow cannot read) was decoded, then refused: a 25 MB
    # file of 20000x20000 took 16 s and 6 GB; 32767x32000 (66 MB) would take 16 GB
    from livecam.capture.still import decode_image
    from livecam.core.errors import InputError

    def no_decoding(*args: object, **kwargs: object) -> None:
        raise AssertionError("the pixels were decoded")

    monkeypatch.setattr(cv2, "imread", no_decoding)
    monkeypatch.setattr(cv2, "imdecode", no_decoding)
    for name in ("huge_20k.png", "huge_40k.png", "huge_12k.hdr"):
        with pytest.raises(InputError, match="megapixels"):
            decode_image(media / name, max_pixels=100_000_000, label="x", knob="k")
        with pytest.raises(InputError, match="megapixels"):
            decode_image((media / name).read_bytes(), max_pixels=100_000_000, label="x",
                         knob="k")


def test_the_limit_is_a_setting(tmp_path: Path, media: Path, astronaut_bgr: np.ndarray) -> None:
    from livecam.capture.still import header_size_px
    from livecam.core.errors import InputError

    small = tmp_path / "a.png"
    cv2.imwrite(str(small), astronaut_bgr)
    assert header_size_px(small) == (512, 512)
    cfg = CaptureConfig(max_image_megapixels=0.2)  # 512x512 = 0.26 MP
    with pytest.raises(InputError,
                       match=r"512x512 \(0 megapixels\), above advanced\.capture\.max_image"):
        make_source(parse_input(f"image:{small}"), cfg).open()
    with pytest.raises(InputError,
                       match=r"has 320x256 frames .* advanced\.capture\.max_image_megapixels"):
        make_source(parse_input(f"file:{media / 'clip.mp4'}"),
                    CaptureConfig(max_image_megapixels=0.05)).open()
    image = make_source(parse_input(f"image:{small}"), CaptureConfig(max_image_megapixels=0.3))
    image.open()
    assert np.array_equal(image.read(), astronaut_bgr)


def test_a_radiance_hdr_image_is_sized_from_its_header(tmp_path: Path,
                                                       astronaut_bgr: np.ndarray) -> None:
    from livecam.capture.still import BROKEN, decode_image, header_size_px

    hdr = tmp_path / "a.hdr"
    cv2.imwrite(str(hdr), astronaut_bgr[:, :320].astype(np.float32) / 255)
    assert header_size_px(hdr) == header_size_px(hdr.read_bytes()) == (320, 512)
    image = decode_image(hdr, max_pixels=200_000, label="x", knob="k")
    assert image.shape == (512, 320, 3) and image.dtype == np.uint8
    assert header_size_px(b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\nno size here\n") == BROKEN


@pytest.mark.parametrize("kind", ["file", "image"])
def test_bad_paths_are_input_errors_exit_2(tmp_path: Path, kind: str) -> None:
    from livecam.core.errors import InputError

    for target in (tmp_path / "nope", tmp_path):
        with pytest.raises(InputError) as exc:
            make_source(parse_input(f"{kind}:{target}"), CaptureConfig()).open()
        # the capture thread sees a CaptureError, the command line a UsageError (exit 2)
        assert isinstance(exc.value, CaptureError) and isinstance(exc.value, UsageError)


def test_a_bare_path_as_input_suggests_the_file_or_image_form() -> None:
    """Issue 39 item 20: `--input clip.mp4` (no kind) says which form was meant."""
    line = one_error_line(livecam("run", "--input", "clip.mp4", "--output", "null"))
    assert "did you mean --input file:clip.mp4?" in line
    line = one_error_line(livecam("run", "--input", "me.JPG", "--output", "null"))
    assert "did you mean --input image:me.JPG?" in line

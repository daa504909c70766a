"""Frame sources: synthetic pattern, video files (real H.264 via PyAV), still images, specs."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from livecam.capture import make_source, parse_input
from livecam.capture.thread import CaptureThread
from livecam.config.schema import CaptureConfig
from livecam.core.errors import CaptureError, UsageError
from livecam.core.mailbox import Mailbox
from livecam.core.metrics import Metrics
from livecam.core.types import Frame, Packet


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


def _capture(path: Path, *, source_i420: bool,
             loop: bool = False) -> tuple[CaptureThread, Mailbox[Frame]]:
    """A capture thread reading ``path`` as fast as it is taken, and its outbox."""
    box: Mailbox[Frame] = Mailbox(policy="block")
    thread = CaptureThread(source=make_source(parse_input(f"file:{path}"), CaptureConfig()),
                           outbox=box, metrics=Metrics(), realtime=False, loop=loop,
                           reconnect_initial_s=0.01, reconnect_max_s=0.04,
                           source_i420=source_i420)
    return thread, box


def test_a_yuv420p_files_frames_carry_their_planes_when_a_stage_takes_them(
        tmp_path: Path) -> None:
    """A raw yuv420p video (what a camera hands its reader) reaches the pipeline with the I420
    planes its BGR was converted from where a stage takes them (the thin client's encoder:
    no conversion of the BGR back, 0.6 ms a 720p frame); ``Packet.from_frame`` keeps them,
    tied to that very image. Where no stage takes them, no frame pays for the copy."""
    rng = np.random.default_rng(3)
    planes = [rng.integers(16, 236, (48 * 3 // 2, 64), np.uint8) for _ in range(3)]
    path = tmp_path / "raw.y4m"
    with av.open(str(path), "w", format="yuv4mpegpipe") as container:
        stream = container.add_stream("wrapped_avframe", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for p in planes:
            for packet in stream.encode(av.VideoFrame.from_ndarray(p, format="yuv420p")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    for wanted in (True, False):
        thread, box = _capture(path, source_i420=wanted)
        thread.start()
        try:
            frames = [box.get(timeout_s=30) for _ in planes]
        finally:
            thread.stop()
        if not wanted:
            assert all(f is not None and f.received_i420 is None for f in frames)
            continue
        # the first frame is decoded by the open, before the capture thread: no planes
        for frame, sent in zip(frames[1:], planes[1:], strict=True):
            assert frame is not None and frame.received_i420 is not None
            assert frame.received_i420.image_bgr is frame.image_bgr
            sent_packet = Packet.from_frame(frame)
            got = sent_packet.planes_i420()
            assert got is not None and np.array_equal(got, sent)  # the file's own planes
            back = cv2.cvtColor(np.ascontiguousarray(frame.image_bgr), cv2.COLOR_BGR2YUV_I420)
            assert not np.array_equal(back, sent)  # what converting back would have sent
            assert sent_packet.with_fields(image_bgr=frame.image_bgr.copy()).planes_i420() is None


def test_an_rgb_video_has_no_planes(tmp_path: Path, astronaut_bgr: np.ndarray) -> None:
    path = tmp_path / "rgb.nut"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("rawvideo", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "bgr24"
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(astronaut_bgr[:48, :64]),
                                           format="bgr24")
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    src = make_source(parse_input(f"file:{path}"), CaptureConfig())
    src.keeps_planes_i420 = True  # type: ignore[attr-defined]
    src.open()
    src.read()  # the open's own frame
    src.close()
    src.open()
    image = src.read()
    assert image is not None and np.array_equal(image, astronaut_bgr[:48, :64])
    assert src.planes_i420_of(image) is None  # type: ignore[attr-defined]


def _av_objects_reachable(roots: Sequence[object]) -> list[str]:
    """The PyAV objects (frames, codec contexts, containers) reachable from ``roots`` through
    references (closures, containers, arrays' bases), modules and classes left out."""
    import types

    module_dicts = {id(vars(m)) for m in list(sys.modules.values()) if m is not None}
    seen: set[int] = set()
    found: list[str] = []
    todo = list(roots)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type, types.CodeType)) or (
                id(obj) in module_dicts):
            continue
        seen.add(id(obj))
        if type(obj).__module__.split(".")[0] == "av":
            found.append(type(obj).__qualname__)
        todo += gc.get_referents(obj)
    return found


def _native_threads() -> int:
    return len(list(Path("/proc/self/task").iterdir()))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_frames_kept_over_a_looping_files_reopens_hold_no_decoder(
        tmp_path: Path) -> None:
    """A frame that outlives its read (in a mailbox, the thin client's feed, the encoder)
    carries plain arrays only: its planes were copied out at read time, so it holds no
    ``av.VideoFrame`` and through it no decoder. A frame that held its decoded frame kept
    each reopened decoder of a looping file alive, with its threads (the 2-minute soak's
    thread count grew)."""
    from tests.helpers.leak_clips import leak_clips

    images = [cv2.resize(image, (320, 180)) for image, _ in leak_clips()["still_2"].frames()]
    n = 6
    path = tmp_path / "loop.mp4"
    write_h264(path, images[:n])  # H.264: a decoder with threads of its own
    before = _native_threads()
    thread, box = _capture(path, source_i420=True, loop=True)
    thread.start()
    kept = []
    try:
        for k in range(5 * n):  # five opens of the file
            frame = box.get(timeout_s=30)
            assert frame is not None and frame.index == k
            if k % n == 1:  # one frame of each open, with its planes, kept
                assert frame.received_i420 is not None
                kept.append(frame)
    finally:
        thread.stop()
    assert not thread.alive
    assert len(kept) == 5
    assert _av_objects_reachable(kept) == []
    # the reader's own threads and its decoders' are gone with it (a closed file's decoder,
    # held in PyAV's own reference cycles, once collected); the kept frames hold none
    gc.collect()
    # at most as many: a thread of an earlier test in this process may end meanwhile
    assert _native_threads() <= before, (before, _native_threads())

"""`livecam run` with `engine.backend: triton` against a real Triton server (the bundled
tritonserver on the CPU, stand-in models): same frames as the local backend, in order, with
several requests in flight; faces covered (never the real face) while the server is gone,
swapping again when it is back, and one line when no server answers. The virtual camera is
pyvirtualcam's registered-backend seam (this machine cannot load v4l2loopback); everything
before it is the production path.

The server's batcher holds a lone request up to 1 s for a second one (Triton's
``max_queue_delay``, its smallest preferred batch being 2): a client that keeps several
requests in flight sends frame k+1's request while frame k's waits there, so the engine's
high-water mark of requests in flight shows whether requests really overlap (not timing);
one that waits for each answer never has two."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.cli import build_parser, main
from livecam.control.status import StateCollector, StatusReporter
from livecam.pipeline.streams import StreamSet
from livecam.subcommands.common import config_from_args
from livecam.subcommands.run import build_from_args
from tests.engines.triton_support import StandinDeployment, free_port, needs_triton
from tests.helpers.frame_code import read_code, write_coded_clip
from tests.helpers.virtualcam import register_recording_backend

pytestmark = [pytest.mark.slow, needs_triton]

OFFLINE = ["advanced.pipeline.realtime=false", "control.api=false", "control.hotkeys=false",
           "advanced.pipeline.status_interval_s=0", "swap.mode=neural"]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinDeployment]:
    yield StandinDeployment(tmp_path_factory.mktemp("triton-run"),
                            max_queue_delay_us=1_000_000)


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray) -> Path:
    path = tmp_path_factory.mktemp("photo") / "astronaut.png"
    cv2.imwrite(str(path), astronaut_bgr)
    return path


@pytest.fixture(scope="module")
def face_box(astronaut_bgr: np.ndarray) -> tuple[int, int, int, int]:
    """The astronaut's face box shrunk by a fifth: pixels every swap or cover must change."""
    from livecam.analysis.photo import analyze_photo

    x1, y1, x2, y2 = analyze_photo(astronaut_bgr).boxes_xyxy[0]
    dx, dy = 0.2 * (x2 - x1), 0.2 * (y2 - y1)
    return int(x1 + dx), int(y1 + dy), int(x2 - dx), int(y2 - dy)


#: Where the coded clip carries each frame's index (away from the face and its paste-back).
CODE_BOX = (8, 448, 136, 504)
CLIP_FRAMES = 8


@pytest.fixture(scope="module")
def coded_clip(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray) -> Path:
    """The astronaut, frame k with k drawn in ``CODE_BOX`` (lossless), to check the order."""
    return write_coded_clip(tmp_path_factory.mktemp("clip") / "coded.mp4", astronaut_bgr,
                            n_frames=CLIP_FRAMES, fps=10.0, bits=8, box_xyxy=CODE_BOX)


def run_streams(tmp: Path, clip: Path, photo: Path, backend: str,
                sets: list[str], *, source: str | None = None,
                n_frames: int = CLIP_FRAMES) -> tuple[StreamSet, list[np.ndarray]]:
    """`livecam run --input file:CLIP --output virtualcam --source PHOTO` as the CLI runs it
    (its parser, config and ``build_from_args``; ``streams.run()``), keeping the streams so
    the test can read the engine's counters afterwards; the frames sent, in order.
    ``source``: another ``--input`` than the clip."""
    name = f"recording-{backend}-{tmp.name}"
    recording = register_recording_backend(name)
    argv = ["run", "--input", source or f"file:{clip}", "--output", "virtualcam", "--source",
            str(photo), "--frames", str(n_frames)]
    for item in [*OFFLINE, "advanced.capture.loop=false", *sets, f"advanced.output.backend={name}",
                 f"advanced.engine.cache_dir={tmp / 'c'}"]:
        argv += ["--set", item]
    args = build_parser().parse_args(argv)
    streams = build_from_args(args, config_from_args(args), daemon=False)
    streams.run()
    return streams, recording.frames


@pytest.fixture(scope="module")
def local_swap(tmp_path_factory: pytest.TempPathFactory, deployment: StandinDeployment,
               photo: Path, coded_clip: Path, astronaut_bgr: np.ndarray,
               face_box: tuple[int, int, int, int]) -> np.ndarray:
    """The face box of the still photo as the local backend swaps it (the last of ten offline
    frames, its smoothing settled): what a frame the Triton backend swapped must show. Its
    frames differ from each other by under one grey level on average, a cover (a blur of the
    real face) by more than ten, so a crop near it is a swap and never a cover."""
    tmp = tmp_path_factory.mktemp("local-swap")
    _, frames = run_streams(tmp, coded_clip, photo, "onnxruntime-still",
                            [f"advanced.models.dir={deployment.models_dir}",
                             f"advanced.models.manifests_dir={deployment.manifests_dir}",
                             "engine.backend=onnxruntime", "advanced.engine.device=cpu"],
                            source=f"image:{photo}", n_frames=10)
    x1, y1, x2, y2 = face_box
    crop = frames[-1][y1:y2, x1:x2].astype(int)
    assert np.abs(crop - astronaut_bgr[y1:y2, x1:x2]).mean() > 10, "the local run swapped"
    return crop


def is_swap(crop: np.ndarray, local_swap: np.ndarray) -> bool:
    """Whether a face crop is the local backend's swap (not a cover, not the real face)."""
    return bool(np.abs(crop.astype(int) - local_swap).mean() < 3)


def test_run_through_triton_sends_the_frames_of_the_local_backend_in_order(
        tmp_path: Path, deployment: StandinDeployment, photo: Path, coded_clip: Path,
        astronaut_bgr: np.ndarray, face_box: tuple[int, int, int, int]) -> None:
    """Several frames' requests in flight (before: one at a time, in_flight_max 1), the
    frames still those of the local backend and in capture order."""
    _, local = run_streams(tmp_path / "local", coded_clip, photo, "onnxruntime",
                           [f"advanced.models.dir={deployment.models_dir}",
                            f"advanced.models.manifests_dir={deployment.manifests_dir}",
                            "engine.backend=onnxruntime", "advanced.engine.device=cpu"])
    with deployment.server():
        streams, remote = run_streams(tmp_path / "remote", coded_clip, photo, "triton",
                                      [*deployment.config_overrides(),
                                       "advanced.engine.triton_in_flight=3"])
    health = streams.apps[0].describe()["remote_engines"]["swap"]
    assert health["failures"] == 0 and health["in_flight"] == 0
    assert health["in_flight_max"] >= 2  # frame k+1's request sent before k's answer
    assert len(local) == len(remote) == CLIP_FRAMES
    assert [read_code(f, box_xyxy=CODE_BOX) for f in remote] == list(range(CLIP_FRAMES))
    assert [read_code(f, box_xyxy=CODE_BOX) for f in local] == list(range(CLIP_FRAMES))
    x1, y1, x2, y2 = face_box
    for a, b in zip(local, remote, strict=True):
        assert np.abs(a[y1:y2, x1:x2].astype(int) - astronaut_bgr[y1:y2, x1:x2]).mean() > 10
        # float16 on the wire flips a swapped crop's pixel by at most one grey level (checked
        # in test_triton_engine); the reference paste-back's float32 blend, truncated to
        # uint8, turns a few of those into two where the mask is nearly opaque
        diff = np.abs(a.astype(int) - b.astype(int))
        assert diff.max() <= 2 and (diff > 1).sum() <= 1e-4 * diff.size


def test_run_with_no_server_stops_with_one_line(
        tmp_path: Path, deployment: StandinDeployment, photo: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = f"127.0.0.1:{free_port()}"
    args = ["run", "--input", f"image:{photo}", "--output", "null", "--source", str(photo),
            "--frames", "1"]
    sets = [*OFFLINE, *deployment.config_overrides(), f"advanced.engine.triton_urls=[{url}]",
            "advanced.engine.triton_connect_timeout_s=0.5"]
    for item in sets:
        args += ["--set", item]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("livecam: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert url in errors[0] and "livecam engines serve" in errors[0]


class FaceCrops:
    """A virtual-camera backend that keeps the face region of every frame sent (whole frames
    of a long run would take hundreds of MB)."""

    def __init__(self, box: tuple[int, int, int, int]) -> None:
        self.box = box
        self.crops: list[np.ndarray] = []
        self.cond = threading.Condition()

    def backend(self) -> type:
        crops = self

        class Backend:
            def __init__(self, **kw: Any) -> None:
                self.kw = kw

            def send(self, frame: np.ndarray) -> None:
                x1, y1, x2, y2 = crops.box
                image = frame.reshape(self.kw["height"], self.kw["width"], -1)
                with crops.cond:
                    crops.crops.append(image[y1:y2, x1:x2].copy())
                    crops.cond.notify_all()

            def close(self) -> None:
                pass

            def device(self) -> str:
                return "face-crops"

            def native_fourcc(self) -> None:
                return None

        return Backend

    def wait_for(self, predicate: Any, timeout_s: float = 180.0) -> int:
        """Wait until ``predicate(crop)`` holds for a crop sent from now on; its index."""
        with self.cond:
            start = len(self.crops)
            deadline = time.monotonic() + timeout_s
            while True:
                for i in range(start, len(self.crops)):
                    if predicate(self.crops[i]):
                        return i
                start = len(self.crops)
                left = deadline - time.monotonic()
                assert left > 0, "timed out waiting for the output"
                self.cond.wait(left)


def test_server_killed_mid_stream_covers_the_face_then_swaps_again(
        tmp_path: Path, deployment: StandinDeployment, photo: Path,
        astronaut_bgr: np.ndarray, face_box: tuple[int, int, int, int],
        local_swap: np.ndarray) -> None:
    import pyvirtualcam

    crops = FaceCrops(face_box)
    pyvirtualcam.register_backend("face-crops", crops.backend())
    x1, y1, x2, y2 = face_box
    real = astronaut_bgr[y1:y2, x1:x2].astype(int)
    argv = ["run", "--input", f"image:{photo}", "--output", "virtualcam", "--source",
            str(photo)]
    sets = ["advanced.pipeline.realtime=true", "capture.fps=10", "control.api=false",
            "control.hotkeys=false", "advanced.pipeline.status_interval_s=0", "swap.mode=neural",
            *deployment.config_overrides(), "advanced.engine.triton_timeout_ms=10000",
            "advanced.engine.triton_in_flight=3",
            "advanced.capture.reconnect_initial_s=0.1",
            "advanced.capture.reconnect_max_s=0.5",
            "advanced.output.backend=face-crops", f"advanced.engine.cache_dir={tmp_path / 'c'}"]
    for item in sets:
        argv += ["--set", item]
    args = build_parser().parse_args(argv)
    server = deployment.server()
    server.open()
    streams = build_from_args(args, config_from_args(args), daemon=False)
    app = streams.apps[0]  # one --input/--output pair: one stream
    streams.start()
    try:
        reporter = StatusReporter(app)
        # the first frames are covered (fail closed) until the face is confirmed and the
        # server has answered; a cover also differs from the real face, so the swap is told
        # by the local backend's own swapped pixels (before: the first crop unlike the real
        # face, which a cover sent under load could be)
        crops.wait_for(lambda c: reporter.status()["remote_engines"]["swap"]["rows"] > 0)
        swapped_at = crops.wait_for(lambda c: is_swap(c, local_swap))
        swapped = crops.crops[swapped_at].astype(int)
        assert reporter.status()["remote_engines"]["swap"]["failures"] == 0
        # the requests of consecutive frames wait for each other in the server's batcher
        crops.wait_for(lambda c: reporter.status()["remote_engines"]["swap"]
                       ["in_flight_max"] >= 2)
        crops.wait_for(lambda c: reporter.status()["remote_engines"]["swap"]["in_flight"] > 0)
        server.kill()  # Triton dies mid-stream, requests in flight
        server.close()
        covered_at = crops.wait_for(lambda c: np.abs(c.astype(int) - swapped).mean() > 10)
        assert reporter.status()["remote_engines"]["swap"]["state"] == "down"
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry()
        registry.register(StateCollector(app))
        up = f'livecam_remote_engine_up{{stage="swap",url="{deployment.url}"}} 0.0'
        lines = generate_latest(registry).decode().splitlines()
        assert up in lines
        assert any(line.startswith(f'livecam_remote_engine_in_flight{{stage="swap",url="'
                                   f'{deployment.url}"}}') for line in lines)
        n_down = len(crops.crops)
        crops.wait_for(lambda c: True)  # the output keeps going while the server is away
        assert len(crops.crops) > n_down
        with deployment.server():
            back_at = crops.wait_for(lambda c: is_swap(c, local_swap))
            assert reporter.status()["remote_engines"]["swap"]["state"] == "ready"
    finally:
        streams.stop()
        server.close()
    sent = crops.crops[swapped_at:back_at + 1]
    assert covered_at < back_at
    # no frame from the first swap on showed the real face: each was swapped or covered
    for crop in sent:
        assert np.abs(crop.astype(int) - real).mean() > 10


def test_doctor_reports_each_server(deployment: StandinDeployment,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    down = f"127.0.0.1:{free_port()}"
    args = ["doctor"]
    for item in [*deployment.config_overrides(),
                 f"advanced.engine.triton_urls=[{deployment.url},{down}]"]:
        args += ["--set", item]
    with deployment.server(), pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code in (0, 1)  # camera/virtual camera verdict; servers are optional
    lines = [line for line in capsys.readouterr().out.splitlines() if "triton server" in line]
    assert lines[0].startswith(f"[ok  ] triton server: {deployment.url}: inswapper_128 ready")
    assert "w600k_r50 ready" in lines[0]
    assert lines[1].startswith(f"[MISS] triton server: {down}:")

"""Network inputs and outputs (issue 40 item 3) with PyAV on both sides, on loopback: real x264
encoding, real FFmpeg protocols, no server program (this machine has none). A dead server
must fail in bounded time with one line; a listener nobody sends to listens again.

What cannot run here: SRT (PyPI's PyAV has no libsrt: only the one-line refusal is tested);
RTMP against a real server (FFmpeg's own ``listen=1`` stands in for one).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.capture import make_source, parse_input
from livecam.capture.network import NetworkSource
from livecam.config.schema import CaptureConfig, OutputConfig
from livecam.core.errors import CaptureError, NoSenderYet, OutputError, UsageError
from livecam.core.netstreams import protocol_available, split_url
from livecam.output import make_sink, parse_output
from livecam.output.network import NetworkSink
from tests.helpers.frame_code import draw_code, read_code

SIZE = (640, 360)
CODE_BOX = (8, 300, 8 + 24 * 10, 340)  # 12 bits, 10 px a bar: readable through H.264


def coded(index: int) -> np.ndarray:
    """A frame with texture (so the encoder has work) and ``index`` drawn in it."""
    rng = np.random.default_rng(index % 7)
    image = rng.integers(60, 190, (SIZE[1], SIZE[0], 3), dtype=np.uint8)
    return draw_code(image, index, bits=12, box_xyxy=CODE_BOX)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A TCP port whose server accepts connections and never says a word (a hung server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield int(server.getsockname()[1])
    server.close()


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """Run ``call`` on a thread; the list gets what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def test_the_url_a_user_types_is_a_network_input_or_output() -> None:
    assert parse_input("rtsp://cam.local/stream").kind == "network"
    assert parse_input("srt://0.0.0.0:9000?mode=listener").target.startswith("srt://")
    assert parse_output("rtmp://live.example/app/key").kind == "network"
    assert parse_output("udp://127.0.0.1:5000").kind == "network"
    source = make_source(parse_input("rtmp://0.0.0.0:1935/live/key?listen=1"), CaptureConfig())
    assert isinstance(source, NetworkSource) and source.live and source.listener
    assert isinstance(make_sink(parse_output("srt://h:9000"), OutputConfig()), NetworkSink)
    with pytest.raises(UsageError, match="APP/KEY"):
        parse_output("rtmp://live.example")  # no application, no key: FFmpeg would fail later
    with pytest.raises(UsageError, match="no host or port"):
        parse_input("udp://?pkt_size=1316")


def test_listen_is_an_option_and_secrets_stay_out_of_messages() -> None:
    url = split_url("rtmp://bob:pw@127.0.0.1:1935/live/SECRETKEY?listen=1")
    assert url.url == "rtmp://bob:pw@127.0.0.1:1935/live/SECRETKEY"  # FFmpeg gets no ?listen
    assert url.options == {"listen": "1"} and url.listen
    assert "SECRETKEY" not in url.shown and "pw" not in url.shown
    assert split_url("rtsp://0.0.0.0:8554/cam?listen=1").options == {"rtsp_flags": "listen"}
    srt = split_url("srt://0.0.0.0:9000?mode=listener&passphrase=longsecretphrase")
    assert srt.listen and "longsecretphrase" not in srt.shown
    assert not split_url("rtmp://live.example/app/key").listen


def test_a_refused_connection_is_one_clear_line() -> None:
    source = NetworkSource(url=f"rtmp://127.0.0.1:{free_port()}/live/KEY", timeout_s=2,
                           fps_fallback=30, size_px=SIZE, max_pixels=10**8)
    with pytest.raises(CaptureError, match=r"cannot be opened .*refused") as caught:
        source.open()
    assert "KEY" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_hung_server_fails_within_the_timeout(blackhole: int) -> None:
    """The server takes the connection and never answers: without a timeout FFmpeg waits for
    ever (the capture thread would never reconnect)."""
    source = NetworkSource(url=f"rtmp://127.0.0.1:{blackhole}/live/key", timeout_s=1,
                           fps_fallback=30, size_px=SIZE, max_pixels=10**8)
    thread, raised = in_thread(source.open)
    thread.join(60)  # far beyond the 1 s timeout: only a hang gets here alive
    assert not thread.is_alive(), "open hung on a server that never answers"
    assert len(raised) == 1 and isinstance(raised[0], CaptureError)
    assert not isinstance(raised[0], NoSenderYet)  # a fault: reopened with backoff
    assert "no stream arrived within advanced.capture.network_timeout_s=1 s" in str(raised[0])


def test_a_listener_nobody_sends_to_listens_again() -> None:
    source = NetworkSource(url=f"rtmp://127.0.0.1:{free_port()}/live/key?listen=1",
                           timeout_s=0.5, fps_fallback=30, size_px=SIZE, max_pixels=10**8)
    with pytest.raises(NoSenderYet, match="no sender connected"):
        source.open()


@pytest.mark.skipif(protocol_available("srt"), reason="this PyAV has SRT: nothing to refuse")
def test_srt_without_libsrt_says_so_in_one_line() -> None:
    source = NetworkSource(url=f"srt://127.0.0.1:{free_port()}?mode=listener", timeout_s=1,
                           fps_fallback=30, size_px=SIZE, max_pixels=10**8)
    with pytest.raises(CaptureError, match="no srt:// protocol"):
        source.open()
    sink = NetworkSink(url="srt://127.0.0.1:9000", bitrate_kbps=1000, timeout_s=1)
    with pytest.raises(OutputError, match="no srt:// protocol"):
        sink.open(width=SIZE[0], height=SIZE[1], fps=30)


def test_a_dead_rtmp_server_is_refused_at_open() -> None:
    sink = NetworkSink(url=f"rtmp://127.0.0.1:{free_port()}/app/KEY", bitrate_kbps=1000,
                       timeout_s=2)
    with pytest.raises(OutputError, match=r"cannot be reached .*check the URL") as caught:
        sink.open(width=SIZE[0], height=SIZE[1], fps=30)
    assert "KEY" not in str(caught.value)


def test_a_hung_server_never_blocks_sending_or_closing(blackhole: int) -> None:
    """The server accepts and never answers: frames are dropped on FFmpeg's thread, the
    output thread (here, this one) is never held, and close ends within the write timeout."""
    sink = NetworkSink(url=f"rtmp://127.0.0.1:{blackhole}/app/key", bitrate_kbps=1000,
                       timeout_s=1)

    def stream() -> None:
        sink.open(width=SIZE[0], height=SIZE[1], fps=30)
        for i in range(90):
            sink.send(coded(i))
        sink.close()

    thread, raised = in_thread(stream)
    thread.join(120)
    assert not thread.is_alive(), "sending to a hung server blocked the output"
    assert not raised, raised


def test_udp_mpegts_round_trip_keeps_the_frames_in_order() -> None:
    """livecam's sink encodes to udp://, livecam's source decodes it: frames arrive, in
    order, with their pixels (the code drawn in each survives H.264)."""
    port = free_port(socket.SOCK_DGRAM)
    source = NetworkSource(url=f"udp://127.0.0.1:{port}", timeout_s=5, fps_fallback=30,
                           size_px=SIZE, max_pixels=10**8)
    source.keeps_planes_i420 = True  # as for the thin client's encoder
    got: list[int | None] = []
    plane_errors: list[float] = []  # each frame's planes against its BGR
    enough = threading.Event()

    def receive() -> None:
        source.open()
        try:
            while len(got) < 30:
                image = source.read()
                got.append(read_code(image, bits=12, box_xyxy=CODE_BOX))
                planes = source.planes_i420_of(image)  # H.264's own yuv420p, copied out
                assert planes is not None and source.planes_i420_of(image.copy()) is None
                back = cv2.cvtColor(planes, cv2.COLOR_YUV2BGR_I420).astype(np.int16)
                plane_errors.append(float(np.abs(back - image).mean()))
        finally:
            source.close()
            enough.set()

    thread, raised = in_thread(receive)
    sink = NetworkSink(url=f"udp://127.0.0.1:{port}", bitrate_kbps=3000, timeout_s=2)
    sink.open(width=SIZE[0], height=SIZE[1], fps=30)
    sent = 0
    try:
        while not enough.wait(1 / 30) and sent < 3000:  # UDP: sent until the reader has them
            sink.send(coded(sent))
            sent += 1
    finally:
        sink.close()
    thread.join(30)
    assert not raised, raised
    assert source.size_px == SIZE
    indices = [i for i in got if i is not None]
    assert len(indices) >= 25, got  # a frame's code may blur, most must read back
    assert indices == sorted(indices) and len(set(indices)) == len(indices)
    assert len(plane_errors) == len(got) and max(plane_errors) < 1.5, plane_errors


@pytest.mark.parametrize("side", ["input", "output"])
def test_livecam_run_with_a_dead_server_exits_with_one_line(side: str, tmp_path: Path) -> None:
    """Through the command a user runs: the line names the URL (not its key) and what to do."""
    url = f"rtmp://127.0.0.1:{free_port()}/live/streamkey"
    pair = (["--input", url, "--output", "null"] if side == "input"
            else ["--input", "synthetic", "--output", url])
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "c"), XDG_DATA_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "livecam.cli", "run", *pair, "--set",
                           "control.hotkeys=false", "--set", "control.api=false"],
                          env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"livecam: error: {side} rtmp://127.0.0.1:"), lines
    assert "Connection refused" in lines[0] and "check the URL" in lines[0]
    assert "streamkey" not in lines[0]


_PUBLISH_RTSP = """
import sys, time, av
from tests.capture.test_network import SIZE, coded
for _ in range(100):  # retried while nobody listens yet
    try:
        with av.open(sys.argv[1], "w", format="rtsp") as out:
            stream = out.add_stream("libx264", rate=30)
            stream.width, stream.height, stream.pix_fmt = *SIZE, "yuv420p"
            stream.options = {"preset": "ultrafast", "tune": "zerolatency", "g": "15"}
            for k in range(3000):
                out.mux(stream.encode(av.VideoFrame.from_ndarray(coded(k), format="bgr24")))
                time.sleep(1 / 30)  # a camera's pace
        break
    except ConnectionRefusedError:
        time.sleep(0.1)
"""


def test_rtsp_listener_takes_a_publisher() -> None:
    """A publisher (ffmpeg, OBS; here PyAV in another process) ANNOUNCEs to livecam's
    `rtsp://…?listen=1`. The listener failed at once (ERANGE) before livecam gave it a listen
    timeout. (In one process the two sides deadlock: PyAV's RTSP muxer waits for the answer
    holding the GIL, which the listener's timeout check needs.)"""
    port = free_port()
    source = NetworkSource(url=f"rtsp://127.0.0.1:{port}/cam?listen=1", timeout_s=20,
                           fps_fallback=30, size_px=SIZE, max_pixels=10**8)
    publisher = subprocess.Popen([sys.executable, "-c", _PUBLISH_RTSP,
                                  f"rtsp://127.0.0.1:{port}/cam"],
                                 cwd=Path(__file__).parents[2], stderr=subprocess.DEVNULL)
    got: list[int | None] = []
    try:
        source.open()
        while len(got) < 20:
            got.append(read_code(source.read(), bits=12, box_xyxy=CODE_BOX))
    finally:
        source.close()
        publisher.kill()
        publisher.wait(30)
    assert source.size_px == SIZE
    indices = [i for i in got if i is not None]
    assert len(indices) >= 15 and indices == sorted(indices), got

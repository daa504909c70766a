"""`livecam run --input rtmp://…?listen=1 --output udp://…` as a user runs it, with a real
RTMP publisher (PyAV, as OBS would publish) and a real MPEG-TS/UDP player (PyAV, as ffplay or
OBS's media source would read): livecam waits for the publisher, swaps, sends; the publisher
stops and comes back, and livecam listens again and goes on. Judged from the player's pixels:
0 leaked face-frames, frames in order. (No RTMP server program here: livecam's input is the
listener, FFmpeg's own ``listen=1``.)"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from tests.capture.test_network import free_port
from tests.helpers.leak_clips import decode, leak_clips, read_index, write_clip
from tests.helpers.leak_judge import judge

pytestmark = pytest.mark.slow


def _wait(what: str, condition: Callable[[], bool], log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: {log.read_text()[-3000:]}"
        time.sleep(0.2)


def _publish(url: str, frames: Sequence[np.ndarray], log: Path) -> None:
    """Publish ``frames`` to ``url`` at 30 fps, as OBS would; retried until the listener
    takes the connection (it may be between two listens)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with av.open(url, "w", format="flv") as out:
                stream = out.add_stream("libx264", rate=Fraction(30))
                stream.width, stream.height, stream.pix_fmt = 1280, 720, "yuv420p"
                stream.options = {"preset": "ultrafast", "tune": "zerolatency", "g": "15",
                                  "crf": "14"}
                start = time.monotonic()
                for k, image in enumerate(frames):
                    for packet in stream.encode(av.VideoFrame.from_ndarray(image,
                                                                           format="bgr24")):
                        out.mux(packet)
                    pause = start + (k + 1) / 30 - time.monotonic()  # a camera's pace
                    if pause > 0:
                        time.sleep(pause)
                for packet in stream.encode(None):
                    out.mux(packet)
            return
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)


class Player:
    """Reads MPEG-TS from a UDP port on a thread and keeps every frame (BGR)."""

    def __init__(self, port: int) -> None:
        self.frames: list[np.ndarray] = []
        self._url = f"udp://127.0.0.1:{port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Player:
        self._thread.start()
        return self

    def _run(self) -> None:
        # open waits for the first packets (FFmpeg probes the stream)
        with av.open(self._url, timeout=(120, 30)) as container:
            for frame in container.decode(video=0):
                self.frames.append(frame.to_ndarray(format="bgr24"))
                if self._stop.is_set():
                    return

    def coded(self) -> int:
        return sum(read_index(f) is not None for f in self.frames[-400:])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def test_rtmp_listener_in_udp_out_swaps_and_takes_the_publisher_back(tmp_path: Path) -> None:
    from skimage import data

    clip = leak_clips()["still_2"]
    clip_path = tmp_path / "clip.mp4"
    truth = write_clip(clip, clip_path)
    inputs = decode(clip_path)
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
    rtmp = f"rtmp://127.0.0.1:{free_port()}/live/streamkey"
    udp_port = free_port(socket.SOCK_DGRAM)
    player = Player(udp_port).start()
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    log = tmp_path / "livecam.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "livecam.cli", "run", "--input", f"{rtmp}?listen=1",
             "--output", f"udp://127.0.0.1:{udp_port}", "--source", str(photo),
             "--set", "control.hotkeys=false", "--set", "control.api=false",
             "--set", "advanced.capture.network_timeout_s=3",
             "--set", "advanced.pipeline.status_interval_s=0"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait("livecam listens", lambda: "waiting for a sender" in log.read_text(), log)
        _wait("black frames go out before any sender", lambda: len(player.frames) > 10, log)
        _publish(rtmp, inputs * 2, log)
        _wait("swapped frames came out", lambda: player.coded() > 30, log)
        _wait("the publisher's end was seen", lambda: "lost" in log.read_text()
              or "ended" in log.read_text(), log)
        before = len(player.frames)
        _publish(rtmp, inputs * 2, log)  # OBS comes back: livecam listened again
        _wait("frames again after the comeback",
              lambda: sum(read_index(f) is not None for f in player.frames[before:]) > 30, log)
        proc.send_signal(signal.SIGINT)  # Ctrl-C, as a user ends `livecam run`
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        player.stop()
    text = log.read_text()
    assert "streamkey" not in text  # the stream key never reaches the log
    assert text.count("1280x720 at 30 fps (flv)") == 2, text[-3000:]  # opened twice
    indices = [read_index(f) for f in player.frames]
    report = judge(inputs, truth, player.frames)
    print(f"player got {report.output_frames} frames: {report.black} black, faces judged "
          f"{report.faces_judged}, leaked {report.leaks_counted}")
    assert report.faces_judged > 20 and report.leaks_counted == 0
    # in order within each pass of the clip: a code never goes back except to restart the clip
    coded = [i for i in indices if i is not None]
    backwards = sum(b < a for a, b in itertools.pairwise(coded))
    assert backwards <= 3, coded  # 2 passes per publish, 2 publishes

"""`livecam serve` started as a user starts it: its own config/data dirs, a library with the
astronaut, users alice and bob."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.daemon.conftest import free_port


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    api: str
    env: dict[str, str]
    tokens: dict[str, str]
    log: Path
    port: int

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", self.api,
                               *args], env=self.env, capture_output=True, text=True, timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            assert self.proc.wait(60) == 0, self.log.read_text()


def hopper_photo() -> Path:
    """Grace Hopper, matplotlib's sample JPEG (a real face photo on disk, 512x600)."""
    import matplotlib.cbook

    return Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))


def start_server(root: Path, *, max_sessions: int, port: int | None = None,
                 prepared: bool = False, tls: tuple[Path, Path] | None = None,
                 hopper: bool = False, settings: tuple[str, ...] = ()) -> Server:
    """``livecam serve --identity astro`` on ``port`` (a free one by default); ``prepared``:
    the library and tokens under ``root`` are there already (a restart); ``tls``: (certificate,
    key) PEM files, served over HTTPS; ``hopper``: the library holds "hopper" too (after
    "astro"); ``settings``: more ``--set`` overrides."""
    import cv2
    from skimage import data

    env = dict(os.environ, XDG_CONFIG_HOME=str(root / "config"),
               XDG_DATA_HOME=str(root / "data"), XDG_CACHE_HOME=str(root / "cache"))

    def livecam(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "livecam.cli", *args], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    root.mkdir(parents=True, exist_ok=True)
    tokens_file = root / "tokens.txt"
    if not prepared:
        photo = root / "astronaut.png"
        cv2.imwrite(str(photo), np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
        livecam("identity", "add", "astro", str(photo), "--force")
        if hopper:
            livecam("identity", "add", "hopper", str(hopper_photo()), "--force")
        tokens_file.write_text("\n".join(f"{name} {livecam('serve', 'token', 'add', name)}"
                                         for name in ("alice", "bob")))
    tokens = dict(line.split() for line in tokens_file.read_text().splitlines())
    port = port or free_port()
    api_port = free_port()
    log = root / f"serve-{port}-{time.monotonic_ns()}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "livecam.cli", "serve", "--identity", "astro",
             "--set", f"advanced.serve.address=127.0.0.1:{port}",
             "--set", f"control.api_address=127.0.0.1:{api_port}",
             "--set", f"advanced.serve.max_sessions={max_sessions}",
             "--set", "advanced.pipeline.status_interval_s=0",
             *(["--set", f"advanced.serve.tls_cert={tls[0]}",
                "--set", f"advanced.serve.tls_key={tls[1]}"] if tls else []),
             *(arg for setting in settings for arg in ("--set", setting))],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, text=True)
    scheme = "https" if tls else "http"
    s = Server(proc, f"{scheme}://127.0.0.1:{port}/whip", f"http://127.0.0.1:{api_port}", env,
               tokens, log, port)
    deadline = time.monotonic() + 120
    while "WHIP endpoint on" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return s


async def first_swapped(server: Server, *, trust: Any = None, user: str = "alice") -> str:
    """A real aiortc WHIP session with ``server`` sending the leak clip ``still_2`` at 30 fps
    until the first swapped frame (one carrying its index) comes back; the answer's SDP.
    ``trust``: the client's SSL context (None: the system's CAs). Raises what the client
    raises (:class:`WhipError` for a refusal)."""
    from livecam.remote.client import FrameFeed, WhipClient
    from tests.helpers.leak_clips import leak_clips, read_index

    frames = [frame for frame, _ in leak_clips()["still_2"].frames()][:30]
    feed = FrameFeed(fps=30.0)
    client = WhipClient(server.url, server.tokens[user], feed, timeout_s=60, ssl=trust)
    stop = asyncio.Event()

    async def pump() -> None:
        k = 0
        while not stop.is_set():
            feed.put(frames[k % len(frames)])
            k += 1
            await asyncio.sleep(1 / 30)

    pumping = asyncio.ensure_future(pump())
    try:
        await client.connect()
        while True:
            image = await client.received(timeout_s=60)
            assert image is not None, "the server ended the video"
            if read_index(image) is not None:
                return client.answer_sdp
    finally:
        stop.set()
        pumping.cancel()
        await client.close()

"""``livecam serve`` started as a user starts it, and WHIP sessions whose camera is a clip
played in a loop (the remote tests and ``scripts/bench_remote.py``).

:func:`start_server`: its own config/data dirs, a library with the astronaut (unless
``swap=False``), users alice and bob.

``async with LoopedSession(url, token, frames) as session:`` starts feeding ``frames`` to
``session.client`` (a :class:`~livecam.remote.client.WhipClient`, not yet connected) at
``fps``; the block's end stops the feeding and closes the client. ``session.sent_at`` says
when each input index last went to the encoder (``time.monotonic()`` s), for glass-to-glass
latencies. One event loop owns it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from livecam.remote.client import FrameFeed, WhipClient
from tests.daemon.conftest import free_port


class LoopedSession:
    def __init__(self, url: str, token: str, frames: Sequence[np.ndarray], *,
                 fps: float = 30.0, timeout_s: float = 60.0, ssl: Any = None) -> None:
        self.frames = frames
        self.fps = fps
        self.sent_at: dict[int, float] = {}
        index_of = {id(f): i for i, f in enumerate(frames)}

        def on_sent(image: np.ndarray) -> None:
            self.sent_at[index_of[id(image)]] = time.monotonic()

        self.feed = FrameFeed(fps=fps, on_sent=on_sent)
        self.client = WhipClient(url, token, self.feed, timeout_s=timeout_s, ssl=ssl)
        self._stop = asyncio.Event()
        self._pumping: asyncio.Future[None] | None = None

    async def _pump(self) -> None:
        k = 0
        while not self._stop.is_set():
            self.feed.put(self.frames[k % len(self.frames)])
            k += 1
            await asyncio.sleep(1 / self.fps)

    async def __aenter__(self) -> LoopedSession:
        self._pumping = asyncio.ensure_future(self._pump())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self._stop.set()
        if self._pumping is not None:
            self._pumping.cancel()
        await self.client.close()


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


def start_server(root: Path, *, max_sessions: int, port: int | None = None,
                 prepared: bool = False, tls: tuple[Path, Path] | None = None,
                 swap: bool = True, status_interval_s: float = 0.0,
                 start_timeout_s: float = 120.0) -> Server:
    """``livecam serve --identity astro`` on ``port`` (a free one by default); ``prepared``:
    the library and tokens under ``root`` are there already (a restart); ``tls``: (certificate,
    key) PEM files, served over HTTPS; ``swap=False``: no identity (the frames come back as
    they went). Raises AssertionError with the server's log when it does not start."""
    import cv2
    from skimage import data

    env = dict(os.environ, XDG_CONFIG_HOME=str(root / "config"),
               XDG_DATA_HOME=str(root / "data"), XDG_CACHE_HOME=str(root / "cache"))

    def livecam(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "livecam.cli", *args], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    root.mkdir(parents=True, exist_ok=True)
    tokens_file = root / "tokens.txt"
    if not prepared:
        if swap:
            photo = root / "astronaut.png"
            cv2.imwrite(str(photo), np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
            livecam("identity", "add", "astro", str(photo), "--force")
        tokens_file.write_text("\n".join(f"{name} {livecam('serve', 'token', 'add', name)}"
                                         for name in ("alice", "bob")))
    tokens = dict(line.split() for line in tokens_file.read_text().splitlines())
    port = port or free_port()
    api_port = free_port()
    log = root / f"serve-{port}-{time.monotonic_ns()}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "livecam.cli", "serve",
             *(["--identity", "astro"] if swap else []),
             "--set", f"advanced.serve.address=127.0.0.1:{port}",
             "--set", f"control.api_address=127.0.0.1:{api_port}",
             "--set", f"advanced.serve.max_sessions={max_sessions}",
             "--set", f"advanced.pipeline.status_interval_s={status_interval_s:g}",
             *(["--set", f"advanced.serve.tls_cert={tls[0]}",
                "--set", f"advanced.serve.tls_key={tls[1]}"] if tls else [])],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, text=True)
    scheme = "https" if tls else "http"
    s = Server(proc, f"{scheme}://127.0.0.1:{port}/whip", f"http://127.0.0.1:{api_port}", env,
               tokens, log, port)
    deadline = time.monotonic() + start_timeout_s
    while "WHIP endpoint on" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return s

"""`livecam serve` as a user starts it, and real aiortc WHIP sessions with it: the one set-up
of the remote tests (tests/remote) and of ``scripts/bench_remote.py``.

- :func:`start_serve`: a `livecam serve` subprocess with its own config/data/cache dirs under
  ``root``, a library with the astronaut (and Grace Hopper), users with tokens.
- :func:`logged_url`: the address a livecam process bound (its log's line), for processes
  started on port 0.

**Ports.** A port picked free here and bound later by another process can be taken in between
(tests run in parallel; every outgoing connection takes an ephemeral port, and a client
retrying a port nobody listens on can even connect to itself). So servers and control APIs
bind port 0 and the port is read back from their log; a server that must come back on the same
port (:func:`start_serve` ``restartable``) gets one below the system's ephemeral range, which
the kernel never hands out by itself, and a start on a taken port is retried.
- :func:`looped_session`: a :class:`~livecam.remote.client.WhipClient` connected to it while
  a clip is fed, looped at ``fps``, into its camera feed.
- :func:`wait_for`, :func:`session_state`: waiting on a condition with the log's tail as the
  failure, and a session's own state read on its Location.
- :func:`start_thin_client`: a `livecam run --remote URL` thin client (:class:`ThinClient`)
  with its control API on a free port, and its ``livecam ctl --json status``;
  :func:`quits_cleanly`: one quit through that API at the end of a block (and killed when the
  block fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from livecam.remote.client import FrameFeed, WhipClient


def free_port() -> int:
    """A port free now, in the ephemeral range: for this process's own use at once only (see
    the module docstring; another process's address takes port 0 and :func:`logged_url`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out for port 0 and outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535  # IANA's, Windows' and macOS's


def restartable_port() -> int:
    """A port free now below the ephemeral range (so no port-0 bind or outgoing connection
    takes it while its server is down), picked at random among 10,000."""
    low = ephemeral_range()[0]
    while True:
        port = random.randrange(max(1024, low - 10_000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def logged_url(log: Path, what: str, proc: subprocess.Popen[str], *,
               timeout_s: float = 120.0) -> str:
    """``http(s)://HOST:PORT`` from the first line of ``log`` saying ``what`` (``"control API
    on"``, ``"WHIP endpoint on"``): the address ``proc`` bound. AssertionError with the log
    when ``proc`` ends or the line does not come in ``timeout_s`` (``proc`` is killed then)."""
    pattern = re.compile(re.escape(what) + r" (https?://[^\s/]+)")
    found: list[str] = []

    def logged() -> bool:
        found[:] = pattern.findall(log.read_text())
        return bool(found) or proc.poll() is not None

    try:
        wait_for(f"{what} ...", logged, log, timeout_s=timeout_s, every_s=0.1)
        assert found, f"{what}: the process ended: {log.read_text()[-3000:]}"
    finally:
        if not found and proc.poll() is None:
            proc.kill()
    return found[0]


def hopper_photo() -> Path:
    """Grace Hopper, matplotlib's sample JPEG (a real face photo on disk, 512x600)."""
    import matplotlib.cbook

    return Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))


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


def start_serve(root: Path, *, max_sessions: int, port: int | None = None,
                restartable: bool = False,
                prepared: bool = False, tls: tuple[Path, Path] | None = None,
                identity: str | None = "astro", hopper: bool = False,
                users: Sequence[str] = ("alice", "bob"), settings: Sequence[str] = (),
                start_timeout_s: float = 120.0, photo: Path | None = None) -> Server:
    """``livecam serve --identity astro`` on ``port`` (default: the port the kernel gives it,
    read back from its log; ``restartable``: one below the ephemeral range, to start a server
    on again after this one stops; a given port is tried 5 times). ``prepared``:
    the library and tokens under ``root`` are there already (a restart); ``tls``: (certificate,
    key) PEM files, served over HTTPS; ``identity`` None: no library and no identity (frames
    pass through); ``hopper``: the library holds "hopper" too (after "astro"); ``settings``:
    more ``--set`` overrides, of ``identity add`` too; ``photo``: the identity's photo
    (default: skimage's astronaut). Raises AssertionError with the log when it does not
    start."""
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
        if identity is not None:
            if photo is None:
                import cv2
                from skimage import data

                photo = root / "astronaut.png"
                cv2.imwrite(str(photo), np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
            livecam("identity", "add", "astro", str(photo), "--force",
                    *(arg for setting in settings for arg in ("--set", setting)))
            if hopper:
                livecam("identity", "add", "hopper", str(hopper_photo()), "--force")
        tokens_file.write_text("\n".join(f"{name} {livecam('serve', 'token', 'add', name)}"
                                         for name in users))
    tokens = dict(line.split() for line in tokens_file.read_text().splitlines())
    attempts = 5 if port is not None or restartable else 1
    for attempt in range(1, attempts + 1):
        bind = port if port is not None else restartable_port() if restartable else 0
        log = root / f"serve-{bind}-{time.monotonic_ns()}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "livecam.cli", "serve",
                 *(["--identity", identity] if identity is not None else []),
                 "--set", f"advanced.serve.address=127.0.0.1:{bind}",
                 "--set", "control.api_address=127.0.0.1:0",
                 "--set", f"advanced.serve.max_sessions={max_sessions}",
                 "--set", "advanced.pipeline.status_interval_s=0",
                 *(["--set", f"advanced.serve.tls_cert={tls[0]}",
                    "--set", f"advanced.serve.tls_key={tls[1]}"] if tls else []),
                 *(arg for setting in settings for arg in ("--set", setting))],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                text=True)
        wait_for("livecam serve started", lambda log=log, proc=proc: "WHIP endpoint on"
                 in log.read_text() or proc.poll() is not None, log,
                 timeout_s=start_timeout_s, every_s=0.1)
        if proc.poll() is None:
            break
        taken = "cannot listen on" in log.read_text()
        assert taken and attempt < attempts, log.read_text()
        time.sleep(1.0)  # a port held a moment (a connection closing): try again
    whip = logged_url(log, "WHIP endpoint on", proc)
    api = logged_url(log, "control API on", proc)
    bound = int(whip.rpartition(":")[2])
    return Server(proc, f"{whip}/whip", api, env, tokens, log, bound)


@contextlib.asynccontextmanager
async def looped_session(url: str, token: str, frames: Sequence[np.ndarray], *,
                         fps: float = 30.0, ssl: Any = None, timeout_s: float = 60.0,
                         on_sent: Callable[[np.ndarray], None] | None = None
                         ) -> AsyncIterator[WhipClient]:
    """A connected :class:`WhipClient` whose camera feed plays ``frames`` looped at ``fps``
    (``on_sent``: called with each frame as it goes to the encoder); stopped and closed
    (DELETE) on exit. ``connect`` raises what it raises (:class:`WhipError`)."""
    feed = FrameFeed(fps=fps, on_sent=on_sent)
    client = WhipClient(url, token, feed, timeout_s=timeout_s, ssl=ssl)
    stop = asyncio.Event()

    async def pump() -> None:
        k = 0
        while not stop.is_set():
            feed.put(frames[k % len(frames)])
            k += 1
            await asyncio.sleep(1 / fps)

    pumping = asyncio.ensure_future(pump())
    try:
        await client.connect()
        yield client
    finally:
        stop.set()
        pumping.cancel()
        await client.close()


def wait_for(what: str, condition: Callable[[], bool], log: Path, *, timeout_s: float = 180,
             every_s: float = 0.2) -> None:
    """Until ``condition()``; AssertionError with ``what`` and the log's tail after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: {log.read_text()[-3000:]}"
        time.sleep(every_s)


def session_state(location: str, token: str) -> dict[str, Any]:
    """``GET`` of a session's Location with its user's token: its state."""
    req = urllib.request.Request(location, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        state: dict[str, Any] = json.loads(resp.read())
    return state


@dataclass
class ThinClient:
    """A `livecam run --remote` subprocess (:func:`start_thin_client`): its control API's URL,
    its environment and its stderr."""

    proc: subprocess.Popen[str]
    api: str
    env: dict[str, str]
    log: Path

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``livecam ctl --url API ARGS`` with the client's environment."""
        return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", self.api,
                               *args], env=self.env, capture_output=True, text=True, timeout=60)

    def status(self) -> dict[str, Any]:
        """``livecam ctl --json status``; {} while the API does not answer."""
        done = self.ctl("--json", "status")
        return json.loads(done.stdout) if done.returncode == 0 else {}

    def remote(self) -> dict[str, Any]:
        """The status of its remote link (``remote_engines.remote``); {} before there is one."""
        remote: dict[str, Any] = self.status().get("remote_engines", {}).get("remote", {})
        return remote

    def quit(self) -> int:
        """``livecam ctl quit``; its exit code (waits up to 60 s)."""
        self.ctl("quit")
        return self.proc.wait(60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def start_thin_client(root: Path, url: str, *args: str, token: str | None = None,
                      env: Mapping[str, str] | None = None) -> ThinClient:
    """``livecam run --remote URL ARGS`` (ARGS: its input, output and other options) with its
    control API on the port the kernel gives it (read back from its log), no status
    lines, its own config and data dirs under ``root``
    (``client-config``, ``client-data``) and its stderr in ``root/client.log``. ``token``:
    written to ``root/token`` and passed with ``--remote-token-file``; ``env``: more
    environment variables (``DISPLAY``, ``LIVECAM_REMOTE_TOKEN``)."""
    full_env = dict(os.environ, XDG_CONFIG_HOME=str(root / "client-config"),
                    XDG_DATA_HOME=str(root / "client-data"), **(env or {}))
    token_args: list[str] = []
    if token is not None:
        (root / "token").write_text(token)
        token_args = ["--remote-token-file", str(root / "token")]
    log = root / "client.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "livecam.cli", "run", "--remote", url, *token_args,
             "--set", "control.api_address=127.0.0.1:0",
             "--set", "advanced.pipeline.status_interval_s=0", *args],
            env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            text=True)
    return ThinClient(proc, logged_url(log, "control API on", proc), full_env, log)


@contextlib.contextmanager
def quits_cleanly(client: ThinClient) -> Iterator[ThinClient]:
    """The block runs with ``client``; when the block ends, ``livecam ctl quit`` asks it to
    stop and it must exit 0 within 60 s (AssertionError with the log's tail). However the block
    or the quit ends, a client still running is killed."""
    try:
        yield client
        assert client.quit() == 0, client.log.read_text()[-3000:]
    finally:
        if client.proc.poll() is None:
            client.proc.kill()

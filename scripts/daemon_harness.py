"""A `livecam daemon` in a private user environment, for the soak and SIGTERM scripts.

    env = DaemonEnv.create(Path("/tmp/soak"))           # identities + a looping face clip
    d = env.start(["--output", "file:/tmp/soak/out.mp4"], port=18765)
    d.wait_ready(min_frames=30)
    d.post("/api/select", {"name": "astro"}); d.status()
    d.terminate()                                        # SIGTERM, then wait for the exit

Each environment has its own XDG config/data/runtime dirs (token, identity library, locks),
so it never touches the user's. The live "camera" is a `file:` clip of a real person (from
insightface's t1 photo) moving across a backdrop, looped by the daemon; identities are the
astronaut (skimage) and two other people of t1. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IDENTITIES = ("astro", "t1b", "t1c")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_clip(path: Path, *, fps: float = 30.0, seconds: float = 4.0) -> None:
    """A face from t1 walking right then back (so the loop is seamless), 640x480 H.264."""
    from fractions import Fraction

    import av
    import numpy as np
    from insightface.data import get_image

    from tests.helpers.clips import Trajectory, face_sprites, make_clip

    sprite = face_sprites(get_image("t1"))[0]
    half = int(fps * seconds / 2)
    there = Trajectory.linear((220, 250), (420, 230), half, 150)
    back = Trajectory.linear((420, 230), (220, 250), half, 150)
    path_xy = Trajectory(np.concatenate([there.centers_xy, back.centers_xy]),
                         np.concatenate([there.face_widths_px, back.face_widths_px]))
    frames, _ = make_clip([sprite], [path_xy], size=(640, 480), noise_sigma=2.0)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = 640, 480, "yuv420p"
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


@dataclass
class DaemonEnv:
    """A private user environment under ``root`` with identities and an input clip."""

    root: Path

    @classmethod
    def create(cls, root: Path) -> DaemonEnv:
        env = cls(root)
        for sub in ("config", "data", "cache"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
        if not env.clip.exists():
            env._make_inputs()
        return env

    @property
    def clip(self) -> Path:
        return self.root / "face-clip.mp4"

    @property
    def environ(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(XDG_CONFIG_HOME=str(self.root / "config"),
                   XDG_DATA_HOME=str(self.root / "data"),
                   XDG_CACHE_HOME=str(self.root / "cache"),
                   XDG_RUNTIME_DIR=str(self.root / "run"))
        env.pop("DISPLAY", None)  # headless, as under systemd
        return env

    def _make_inputs(self) -> None:
        import cv2
        import numpy as np
        from insightface.data import get_image
        from skimage.data import astronaut

        from livecam.identity.library import IdentityLibrary

        t1 = get_image("t1")
        photos = {"astro": np.ascontiguousarray(astronaut()[:, :, ::-1]),
                  "t1b": np.ascontiguousarray(t1[204:485, 1031:1280]),  # frontal, not the clip's
                  "t1c": np.ascontiguousarray(t1[180:500, 0:260])}
        library = IdentityLibrary(self.root / "data" / "livecam" / "identities")
        for name, image in photos.items():
            photo = self.root / f"{name}.png"
            cv2.imwrite(str(photo), image)
            library.add(name, [photo], force=True)
        tmp = self.clip.with_suffix(".tmp.mp4")
        _write_clip(tmp)
        tmp.replace(self.clip)

    def start(self, extra_args: list[str], *, port: int | None = None,
              stderr_path: Path | None = None, nice: int = 0) -> Daemon:
        """``livecam daemon --input file:<clip>`` plus ``extra_args``; stderr to a file."""
        port = port or free_port()
        stderr_path = stderr_path or self.root / f"daemon-{port}.log"
        cmd = [sys.executable, "-m", "livecam.cli", "daemon", "--input", f"file:{self.clip}",
               "--set", f"control.api_address=127.0.0.1:{port}", *extra_args]
        if nice:
            cmd = ["nice", "-n", str(nice), *cmd]
        err = open(stderr_path, "w")  # noqa: SIM115 - the child owns it; closed on return
        try:
            proc = subprocess.Popen(cmd, env=self.environ, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err)
        finally:
            err.close()
        return Daemon(self, proc, port, stderr_path)


@dataclass
class Daemon:
    env: DaemonEnv
    proc: subprocess.Popen[bytes]
    port: int
    stderr_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def token(self) -> str:
        return (self.env.root / "config" / "livecam" / "api-token").read_text().strip()

    def _call(self, path: str, body: dict[str, Any] | None = None,
              timeout_s: float = 10.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data,
                                     method="GET" if body is None else "POST",
                                     headers={"Authorization": f"Bearer {self.token()}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())

    def status(self) -> dict[str, Any]:
        return dict(self._call("/api/status"))

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call(path, body))

    def ctl(self, *args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """``livecam ctl ARGS`` as a user would type it (a new process each time)."""
        return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--set",
                               f"control.api_address=127.0.0.1:{self.port}", *args],
                              env=self.env.environ, capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    def wait_ready(self, min_frames: int = 30, timeout_s: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: "
                                   f"{self.stderr_path.read_text()[-2000:]}")
            try:
                status = self.status()
                if status["frames"]["sent"] >= min_frames:
                    return status
            except (OSError, ValueError):
                pass  # not listening yet, or the token file is not written yet
            time.sleep(0.2)
        raise RuntimeError("daemon did not become ready")

    def terminate(self, timeout_s: float = 30.0) -> tuple[int, float]:
        """SIGTERM; (exit code, seconds from the signal to the exit)."""
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return code, time.perf_counter() - t0

    def log_records(self) -> tuple[list[dict[str, Any]], list[str]]:
        """(JSON records, lines that are not one JSON object) of the daemon's stderr."""
        records, other = [], []
        for line in self.stderr_path.read_text(errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                value = None
            if isinstance(value, dict):
                records.append(value)
            elif line.strip():
                other.append(line)
        return records, other

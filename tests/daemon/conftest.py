"""Start `livecam daemon` as a subprocess, as systemd would, and drive it with `livecam ctl`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

PLUGIN_DIR = Path(__file__).parent / "plugin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Daemon:
    """One daemon subprocess with its own config/data/runtime dirs under ``root``."""

    root: Path
    name: str = "d0"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[str] | None = None
    record_dir: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(XDG_CONFIG_HOME=str(self.root / "config"), XDG_DATA_HOME=str(self.root / "data"),
                   XDG_RUNTIME_DIR=str(self.root / "run"),
                   XDG_STATE_HOME=str(self.root / "state"),  # the last used identity
                   PYTHONPATH=os.pathsep.join([str(PLUGIN_DIR), env.get("PYTHONPATH", "")]))
        env.pop("DISPLAY", None)  # headless, as under systemd
        if self.record_dir is not None:
            env["LIVECAM_TEST_RECORD_DIR"] = str(self.record_dir)
        return env

    @property
    def control_sets(self) -> list[str]:
        """The daemon's and ctl's API address, and a command's wait for the pipeline long
        enough for a loaded test host (the default 2 s answers `applied: false` there)."""
        return ["--set", f"control.api_address=127.0.0.1:{self.port}",
                "--set", "advanced.control.apply_wait_s=60"]

    def start(self, *args: str, record: bool = True, cwd: Path | None = None) -> Daemon:
        (self.root / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
        if record:
            self.record_dir = self.root / f"rec-{self.name}"
        cmd = [sys.executable, "-m", "livecam.cli", "daemon", *args, *self.control_sets,
               "--set", "advanced.pipeline.status_interval_s=0"]
        # stderr to a file, not a pipe: an undrained pipe fills up and blocks the daemon
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, cwd=cwd,
                                         stdout=subprocess.DEVNULL, stderr=err, text=True)
        return self

    @property
    def stderr_path(self) -> Path:
        return self.root / f"{self.name}.stderr"

    def stderr(self) -> str:
        """What the daemon wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", *self.control_sets,
                                 *args], env=self.env, capture_output=True, text=True, timeout=120)
        if check:
            assert result.returncode == 0, result.stderr
        return result

    def status(self) -> dict[str, Any]:
        return json.loads(self.ctl("--json", "status").stdout)

    def api_post(self, path: str, body: dict[str, Any], timeout_s: float = 10) -> Any:
        """POST to the control API directly (no `ctl` process: for many quick commands)."""
        import urllib.request

        token = (self.root / "config" / "livecam" / "api-token").read_text().strip()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())

    def wait_ready(self, min_frames: int = 10, timeout_s: float = 180) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}: "
                                     f"{self.stderr()}")
            result = self.ctl("--json", "status", check=False)
            if result.returncode == 0:
                status = json.loads(result.stdout)
                if status["frames"]["sent"] >= min_frames:
                    return status
            time.sleep(0.2)
        raise AssertionError("daemon did not become ready")

    def frames(self) -> np.ndarray:
        """Every frame the recording virtual camera received, (N, H, W, 3) uint8 BGR."""
        assert self.record_dir is not None
        meta = json.loads((self.record_dir / "meta.json").read_text())
        raw = np.fromfile(self.record_dir / "frames.raw", np.uint8)
        size = meta["width"] * meta["height"] * 3
        n = len(raw) // size
        return raw[:n * size].reshape(n, meta["height"], meta["width"], 3)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                # generous: tests check the exit status, and a loaded host exits slowly (how
                # fast a daemon stops is scripts/bench_sigterm.py's figure)
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def new_daemon(tmp_path: Path) -> Iterator[Callable[[], Daemon]]:
    """Makes daemons sharing one user environment (same dirs, as on one user's machine);
    each records to its own folder. All are stopped at the end."""
    made: list[Daemon] = []

    def make() -> Daemon:
        d = Daemon(tmp_path, name=f"d{len(made)}")
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()


def write_clip(path: Path, frames: list[np.ndarray], fps: float = 30.0) -> Path:
    """H.264 MP4 of BGR ``frames`` (PyAV, as the FileSink writes)."""
    from fractions import Fraction

    import av

    h, w = frames[0].shape[:2]
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


@pytest.fixture(scope="session")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 s looping "webcam" clip: the largest face of insightface's t1 (a real person)
    walking right and back across a backdrop, 480x360 H.264."""
    from insightface.data import get_image

    from tests.helpers.clips import Trajectory, face_sprites, make_clip

    sprite = face_sprites(get_image("t1"))[0]
    there = Trajectory.linear((170, 190), (310, 170), 30, 120)
    back = Trajectory.linear((310, 170), (170, 190), 30, 120)
    trajectory = Trajectory(np.concatenate([there.centers_xy, back.centers_xy]),
                            np.concatenate([there.face_widths_px, back.face_widths_px]))
    frames, _ = make_clip([sprite], [trajectory], size=(480, 360), noise_sigma=2.0)
    return write_clip(tmp_path_factory.mktemp("clip") / "face.mp4", frames)


def add_identities(d: Daemon, astronaut_bgr: np.ndarray) -> list[str]:
    """Real people in the daemon's own library: the astronaut and two others from t1 (not
    the person in ``face_clip``). Returns their names."""
    import cv2
    from insightface.data import get_image

    from livecam.identity.library import IdentityLibrary

    t1 = get_image("t1")
    # frontal faces: identity add refuses a head turned past advanced.identity.max_turn_deg
    photos = {"astro": astronaut_bgr, "t1b": np.ascontiguousarray(t1[204:485, 1031:1280]),
              "t1c": np.ascontiguousarray(t1[180:500, 0:260])}
    library = IdentityLibrary(d.root / "data" / "livecam" / "identities")
    for name, image in photos.items():
        photo = d.root / f"{name}.png"
        cv2.imwrite(str(photo), image)
        library.add(name, [photo], force=True)
    return list(photos)

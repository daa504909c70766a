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
                   PYTHONPATH=os.pathsep.join([str(PLUGIN_DIR), env.get("PYTHONPATH", "")]))
        env.pop("DISPLAY", None)  # headless, as under systemd
        if self.record_dir is not None:
            env["LIVECAM_TEST_RECORD_DIR"] = str(self.record_dir)
        return env

    @property
    def address_set(self) -> list[str]:
        return ["--set", f"control.api_address=127.0.0.1:{self.port}"]

    def start(self, *args: str, record: bool = True, cwd: Path | None = None) -> Daemon:
        (self.root / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
        if record:
            self.record_dir = self.root / f"rec-{self.name}"
        cmd = [sys.executable, "-m", "livecam.cli", "daemon", *args, *self.address_set,
               "--set", "pipeline.status_interval_s=0"]
        self.proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return self

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", *self.address_set,
                                 *args], env=self.env, capture_output=True, text=True, timeout=30)
        if check:
            assert result.returncode == 0, result.stderr
        return result

    def status(self) -> dict[str, Any]:
        return json.loads(self.ctl("--json", "status").stdout)

    def wait_ready(self, min_frames: int = 10, timeout_s: float = 60) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}: "
                                     f"{self.proc.stderr.read() if self.proc.stderr else ''}")
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
                self.proc.wait(5)
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

"""`livecam ctl reload` waits for the reload it asked for (reloads run in the background) and
says how it ended: over several streams in one line, and a reload that outlasts the wait (or
that the pipeline has not taken yet) as still going on, never as a success. (The daemon end
to end: tests/daemon/test_daemon_reload.py.)"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from livecam.app import StreamSet, build_streams
from livecam.config import Config, load_config
from livecam.control.api import ControlServer
from livecam.core.types import Packet
from livecam.pipeline.passthrough import PassThrough
from tests.control.conftest import NAMES, PhotoCatalog, start_running


@dataclasses.dataclass
class Served:
    streams: StreamSet
    url: str
    token_file: Path

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", self.url,
                               "--token-file", str(self.token_file),
                               "--set", "advanced.control.apply_wait_s=60", *args],
                              capture_output=True, text=True, timeout=60)


def overrides(tmp_path: Path) -> list[str]:
    """The --set of these runs (their reloads read them again, as `livecam run` does)."""
    return ["advanced.pipeline.status_interval_s=0", "control.api_address=127.0.0.1:0",
            f"advanced.control.token_file={tmp_path / 'api-token'}"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Starts streams (synthetic in, null out) with the control API on a free port, whose
    reloads call ``loader``; stops them at the end."""
    made: list[StreamSet] = []

    def start(loader: Callable[[], Config], n_streams: int = 1) -> Served:
        token_file = tmp_path / "api-token"
        config = load_config(None, overrides(tmp_path))
        streams = build_streams(config, pairs=[("synthetic:64x48", "null")] * n_streams,
                                hotkeys=False, api_required=True, config_loader=loader)
        made.append(streams)
        streams.start()
        (server,) = [c for c in streams.controls if isinstance(c, ControlServer)]
        return Served(streams, server.url, token_file)

    yield start
    for streams in made:
        streams.stop()


def test_a_broken_config_over_several_streams_is_one_line_and_exit_1(
        serve: Callable[..., Served], tmp_path: Path) -> None:
    path = tmp_path / "livecam.yaml"
    path.write_text("pipeline:\n  status_interval_s: 0\n")
    served = serve(lambda: load_config(path, overrides(tmp_path)), n_streams=2)
    path.write_text("pipeline: [\n")
    result = served.ctl("reload")
    assert result.returncode == 1, (result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.count("config not reloaded") == 1 and "not valid YAML" in line, line
    path.write_text("pipeline:\n  status_interval_s: 0\n")
    result = served.ctl("reload")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "reloaded: 0 identities (none)", result.stdout


def test_a_reload_that_outlasts_the_wait_is_not_called_a_success(
        serve: Callable[..., Served], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("livecam.control.apply._RELOAD_TIMEOUT_S", 0.5)
    release = threading.Event()
    fast_config = load_config(None, overrides(tmp_path))

    def slow_loader() -> Config:  # a config on a hung network share, or slow new stages
        assert release.wait(60), "the test never released the reload"
        return fast_config

    served = serve(slow_loader)
    try:
        result = served.ctl("reload")
        assert result.returncode == 0, result.stderr
        assert "still reloading" in result.stderr, result.stderr
        assert "reloaded" not in result.stdout, result.stdout
    finally:
        release.set()
    # the next request waits for the pass after the slow one, which ends now
    result = served.ctl("reload")
    assert result.returncode == 0 and result.stdout.startswith("reloaded:"), result


class _Stuck(PassThrough):
    """A stage that holds its frame until released: the pipeline takes no command."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def process(self, packet: Packet) -> Packet:
        self.entered.set()
        assert self.release.wait(60), "the test never released the stage"
        return packet


def test_a_reload_the_pipeline_has_not_taken_is_not_called_a_success(
        fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reply said "applied" after its wait ran out: asyncio.wait_for cancels what it
    waits for, and a cancelled future counts as done."""
    stuck = _Stuck()
    running = start_running(fast_config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES),
                            stages=[stuck], apply_wait_s=0.3)
    try:
        assert stuck.entered.wait(60), "no frame reached the stage"
        reply = running.json("/api/reload", method="POST")
        assert reply["applied"] is False and reply["reload"]["status"] == "reloading", reply
        assert "has not started" in reply["reload"]["message"], reply
    finally:
        stuck.release.set()
        running.app.stop()

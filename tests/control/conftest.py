"""A real running app (synthetic input, null output) with the control API on a free port."""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.app import App, build_app
from livecam.config import Config
from livecam.control.api import ControlServer
from livecam.control.http import Limits
from livecam.core.types import RuntimeState
from livecam.pipeline.passthrough import PassThrough

NAMES = ("alice", "bob", "carol")


class PhotoCatalog:
    """Identity names with thumbnails cut from a real photo (the identity library's own tests
    cover the library; here only names and JPEG bytes matter)."""

    def __init__(self, photo_bgr: np.ndarray, names: tuple[str, ...]) -> None:
        self._names = names
        ok, buf = cv2.imencode(".jpg", cv2.resize(photo_bgr, (64, 64)))
        assert ok
        self._jpeg = buf.tobytes()

    def names(self) -> tuple[str, ...]:
        return self._names

    def thumbnail_jpeg(self, name: str) -> bytes | None:
        return self._jpeg if name in self._names else None


@dataclass
class Running:
    app: App
    server: ControlServer
    token: str
    token_file: Path
    snapshots: Path

    @property
    def url(self) -> str:
        return self.server.url

    def call(self, path: str, *, method: str = "GET", body: dict[str, Any] | None = None,
             token: str | None = "default", query_token: str | None = None
             ) -> tuple[int, bytes, dict[str, str]]:
        """(status, body, headers); HTTP errors are returned, not raised."""
        token = self.token if token == "default" else token
        url = self.url + path + (f"?token={query_token}" if query_token is not None else "")
        data = None if body is None and method == "GET" else json.dumps(body or {}).encode()
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            # generous: a loaded host answers slowly; a wrong answer fails, not a slow one
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), dict(exc.headers)

    def json(self, path: str, **kw: Any) -> Any:
        status, body, _ = self.call(path, **kw)
        assert status == 200, (status, body)
        return json.loads(body)

    def commands_applied(self, timeout_s: float = 60.0) -> None:
        """Wait until every command queued so far has been applied: a no-op command through
        the same queue (applied in order), instead of sleeping and hoping."""
        assert self.app.commands.put(_NoOp()).wait(timeout_s), "the pipeline stopped applying"

    def wait_sent(self, n: int, timeout_s: float = 60.0) -> None:
        """Wait until the output has sent ``n`` frames (repeats included) and the API can
        show the last one (preview, snapshot)."""
        last = self.app.live.wait_newer(n - 1, timeout_s)
        assert last is not None and last.frames_sent >= n, f"fewer than {n} frames sent"


class _NoOp:
    """A command that changes nothing (a barrier in the command queue)."""

    def apply(self, state: RuntimeState) -> RuntimeState:
        return state


def start_running(config: Config, tmp_path: Path, catalog: PhotoCatalog | Any,
                  input_spec: str = "synthetic:160x120", output_spec: str = "null",
                  stages: list[Any] | None = None, limits: Limits | None = None,
                  apply_wait_s: float = 60.0) -> Running:
    """The app and its control server. A command's reply waits up to ``apply_wait_s`` for the
    pipeline: on a loaded host the default 2 s can pass first (`applied: false`)."""
    control = dataclasses.replace(config.control, api_address="127.0.0.1:0",
                                  status_push_interval_s=0.1, apply_wait_s=apply_wait_s)
    config = dataclasses.replace(config, control=control)
    app = build_app(config, input_spec=input_spec, output_spec=output_spec, stages=stages,
                    state=RuntimeState(identities=catalog.names()))
    token_file = tmp_path / "cfg" / "api-token"
    server = ControlServer(targets=[app], catalog=catalog, token_file=token_file, config=control,
                           snapshot_dir=tmp_path / "snaps", limits=limits)
    app.controls.append(server)
    app.start()
    return Running(app, server, token_file.read_text().strip(), token_file, tmp_path / "snaps")


@pytest.fixture
def running(fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray) -> Iterator[Running]:
    # A pass-through stage: these tests are about the API, not the swap (test_switching.py
    # drives the real analysis and swap stages through the API).
    r = start_running(fast_config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES),
                      stages=[PassThrough()])
    try:
        yield r
    finally:
        r.app.stop()

"""Control of several streams in one process: the API, `livecam ctl --stream K` and the panel
act on one stream or on all, and a stream that has ended is shown stopped and not waited for.

Real threads, real sources and sinks, the real control API and a real headless Chromium for
the panel; the stages are the small test stages of ``test_streams.py``.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.config import Config
from livecam.control.api import ControlServer
from livecam.pipeline.streams import StreamSet
from tests.control.conftest import NAMES, PhotoCatalog
from tests.pipeline.test_streams import Marker, livecam, stream_app, wait_until


@pytest.fixture
def two_streams(fast_config: Config, tmp_path: Path,
                astronaut_bgr: np.ndarray) -> Iterator[tuple[StreamSet, ControlServer, str]]:
    # a command's reply waits for the pipelines up to 60 s: 2 s can pass on a loaded host
    control = dataclasses.replace(fast_config.control, api_address="127.0.0.1:0",
                                  status_push_interval_s=0.1, apply_wait_s=60.0)
    config = dataclasses.replace(fast_config, control=control)
    streams = StreamSet([stream_app(config, [Marker()], 0),
                         stream_app(config, [Marker()], 1, width=80)])
    token_file = tmp_path / "cfg" / "api-token"
    server = ControlServer(targets=streams.apps, catalog=PhotoCatalog(astronaut_bgr, NAMES),
                           token_file=token_file, config=control,
                           snapshot_dir=tmp_path / "snaps")
    streams.controls.append(server)
    streams.start()
    try:
        yield streams, server, token_file.read_text().strip()
    finally:
        streams.stop()


def call(server: ControlServer, token: str, path: str, body: dict[str, Any] | None = None
         ) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data,
                                 method="GET" if body is None else "POST",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if path != "/metrics" else raw.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_api_acts_on_one_stream_or_on_all(two_streams: tuple[StreamSet, ControlServer, str]
                                          ) -> None:
    streams, server, token = two_streams
    status, reply = call(server, token, "/api/select?stream=1", {"name": "bob"})
    assert status == 200 and reply["applied"] and reply["state"]["active_identity"] == "bob"
    assert [a.state.active_identity for a in streams.apps] == [None, "bob"]
    status, reply = call(server, token, "/api/bypass", {"on": True})  # no stream: every one
    assert status == 200 and reply["applied"]
    assert [a.state.bypass for a in streams.apps] == [True, True]
    assert [a.state.active_identity for a in streams.apps] == [None, "bob"]

    status, doc = call(server, token, "/api/status?stream=1")
    assert status == 200 and doc["stream"] == 1 and doc["active_identity"] == "bob"
    assert [s["stream"] for s in doc["streams"]] == [0, 1]
    assert [s["input"] for s in doc["streams"]] == ["synthetic:64x48", "synthetic:80x48"]
    status, doc = call(server, token, "/api/status")
    assert doc["stream"] == 0 and len(doc["streams"]) == 2

    status, reply = call(server, token, "/api/status?stream=2")
    assert status == 400 and "from 0 to 1" in reply["error"]
    status, text = call(server, token, "/metrics")
    assert status == 200
    assert 'livecam_bypass{stream="0"} 1.0' in text and 'stream="1"' in text


def test_a_stream_that_quit_is_shown_stopped_and_not_waited_for(
        two_streams: tuple[StreamSet, ControlServer, str], tmp_path: Path) -> None:
    """After `livecam ctl --stream 0 quit`, a command to every stream waited 2 s for the
    stopped one and said "not applied" (a last `ctl quit` got no reply at all: the process
    ended first), a command to it said nothing, and status showed its fps decaying."""
    streams, server, token = two_streams
    status, reply = call(server, token, "/api/quit?stream=0", {})
    assert status == 200 and reply["applied"]
    assert wait_until(lambda: streams.apps[0].done)
    status, reply = call(server, token, "/api/bypass?stream=0", {"on": True})
    assert status == 409 and "stream 0 has stopped" in reply["error"], reply
    status, reply = call(server, token, "/api/bypass", {"on": True})
    # stream 1 applied it, and the reply shows its state, not the stopped stream's
    assert status == 200 and reply["applied"] and reply["state"]["bypass"], reply
    assert streams.apps[1].state.bypass and not streams.apps[0].state.bypass
    status, doc = call(server, token, "/api/status")
    assert [b["stopped"] for b in doc["streams"]] == [True, False]
    assert doc["streams"][0]["fps_out"] == 0.0  # not the last second's rate, fading out
    result = livecam("ctl", "--url", server.url, "--token-file",
                     str(tmp_path / "cfg" / "api-token"), "--stream", "0", "next")
    assert result.returncode == 1 and result.stderr.startswith("livecam: error: stream 0 has "
                                                               "stopped"), result.stderr


def test_ctl_stream_reaches_one_stream(two_streams: tuple[StreamSet, ControlServer, str],
                                       tmp_path: Path) -> None:
    streams, server, _ = two_streams
    token_file = tmp_path / "cfg" / "api-token"
    result = livecam("ctl", "--url", server.url, "--token-file", str(token_file), "--set",
                     "advanced.control.apply_wait_s=60", "--stream", "0", "select", "carol")
    assert result.returncode == 0, result.stderr
    assert [a.state.active_identity for a in streams.apps] == ["carol", None]
    result = livecam("ctl", "--url", server.url, "--token-file", str(token_file), "status")
    assert result.returncode == 0, result.stderr
    assert "streams: 2" in result.stdout and "1: synthetic:80x48 -> null" in result.stdout
    result = livecam("ctl", "--url", server.url, "--token-file", str(token_file), "--stream",
                     "7", "next")
    assert result.returncode == 2 and "from 0 to 1" in result.stderr


def test_panel_lists_the_streams_and_acts_on_the_one_picked(
        two_streams: tuple[StreamSet, ControlServer, str], tmp_path: Path) -> None:
    from tests.control.test_panel import ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    streams, server, token = two_streams
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 360, "height": 720})
            page.goto(f"{server.url}/panel?token={token}")
            page.wait_for_selector("#streambox.on")
            options = page.eval_on_selector_all("#stream option", "os => os.map(o => o.text)")
            assert options == ["every stream", "stream 0: synthetic:64x48 → null",
                               "stream 1: synthetic:80x48 → null"]
            page.select_option("#stream", "1")
            page.click(".identity[data-name='carol']")
            assert wait_until(lambda: streams.apps[1].state.active_identity == "carol", 5)
            assert streams.apps[0].state.active_identity is None  # only the stream picked
            page.select_option("#stream", "")
            page.click("#bypass")
            assert wait_until(lambda: all(a.state.bypass for a in streams.apps), 5)
            # a stream that quit: listed as stopped, and a command to it says why it is
            # refused until the next command succeeds (the status push used to wipe "error
            # 409" within a second)
            assert call(server, token, "/api/quit?stream=1", {})[0] == 200
            page.wait_for_selector("#streams >> text=stopped")
            page.select_option("#stream", "1")
            page.click("#next")
            page.wait_for_selector("#msg >> text=stream 1 has stopped")
            page.screenshot(path=str(tmp_path / "panel-streams.png"), full_page=True)
        finally:
            browser.close()


def test_a_snapshot_of_every_stream_keeps_each_streams_frame(
        two_streams: tuple[StreamSet, ControlServer, str]) -> None:
    """Before: every stream saved its frame to the one path, so the file held whichever
    stream wrote last and the other snapshots were lost."""
    import cv2

    streams, server, token = two_streams
    for app in streams.apps:
        assert app.live.wait_newer(0, 60) is not None
    status, reply = call(server, token, "/api/snapshot", {})
    assert status == 200 and reply["applied"], reply
    assert len(reply["paths"]) == 2 and reply["path"] == reply["paths"][0]
    widths = [cv2.imread(path).shape[1] for path in reply["paths"]]
    assert widths == [64, 80]
    status, reply = call(server, token, "/api/snapshot?stream=1", {})
    assert status == 200 and len(reply["paths"]) == 1
    assert cv2.imread(reply["path"]).shape[1] == 80

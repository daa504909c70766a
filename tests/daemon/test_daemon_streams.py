"""Streams added and removed while `livecam daemon` runs: `livecam ctl stream add|remove|list`
and ``/api/streams`` on the real control server; the first stream keeps sending meanwhile."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.conftest import Daemon
from tests.pipeline.test_streams import frames_in, wait_until

pytestmark = pytest.mark.slow


def api(d: Daemon, method: str, path: str, body: dict[str, Any] | None = None
        ) -> tuple[int, Any]:
    token = (d.root / "config" / "livecam" / "api-token").read_text().strip()
    req = urllib.request.Request(f"http://127.0.0.1:{d.port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if path != "/metrics" else raw.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def sent(d: Daemon, k: int) -> int:
    return int(json.loads(d.ctl("--json", "--stream", str(k), "status").stdout)["frames"]["sent"])


def test_streams_added_and_removed_through_ctl_and_the_api(
        new_daemon: Callable[[], Daemon], tmp_path: Path) -> None:
    d = new_daemon().start("--input", "synthetic:160x120", "--output", "null",
                           "--set", "advanced.pipeline.max_streams=3", record=False)
    d.wait_ready(min_frames=10)
    out = tmp_path / "added.mp4"
    added = d.ctl("stream", "add", "synthetic:96x64", f"file:{out}")
    assert added.stdout.strip() == "1"
    assert wait_until(lambda: sent(d, 1) > 10, timeout_s=60)
    listed = d.ctl("stream", "list").stdout
    assert "0: synthetic:160x120 -> null" in listed
    assert f"1: synthetic:96x64 -> file:{out}" in listed

    # commands reach the added stream on its own and with every stream
    d.ctl("--stream", "1", "bypass", "on")
    doc = json.loads(d.ctl("--json", "status").stdout)
    assert [(b["stream"], b["bypass"]) for b in doc["streams"]] == [(0, False), (1, True)]
    status, metrics = api(d, "GET", "/metrics")
    assert status == 200 and 'livecam_bypass{stream="1"} 1.0' in metrics

    # a bad spec, then through the API: 201 with the id, the limit, an unknown stream
    bad = d.ctl("stream", "add", "nosuch:thing", "null", check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "nosuch" in bad.stderr
    status, reply = api(d, "POST", "/api/streams", {"input": "synthetic:64x48",
                                                    "output": "null"})
    assert status == 201 and reply["stream"] == 2, reply
    status, reply = api(d, "POST", "/api/streams", {"input": "synthetic:64x48",
                                                    "output": "null"})
    assert status == 409 and "advanced.pipeline.max_streams (3)" in reply["error"], reply
    gone = d.ctl("stream", "remove", "9", check=False)
    assert gone.returncode == 2 and "no stream 9 (running: 0, 1, 2)" in gone.stderr

    before = sent(d, 0)
    removed = d.ctl("stream", "remove", "1")
    assert removed.stdout.startswith("stream 1 removed:")
    status, reply = api(d, "DELETE", "/api/streams/2")
    assert status == 200 and reply["removed"] is True
    assert wait_until(lambda: sent(d, 0) > before + 10, timeout_s=60)  # stream 0 never stopped
    lines = d.ctl("stream", "list").stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("0: synthetic:160x120 -> null"), lines
    last = d.ctl("stream", "remove", "0", check=False)
    assert last.returncode == 1 and "stream 0 is the last one" in last.stderr
    assert frames_in(out) > 10  # the removed stream's file was closed and is playable
    assert d.proc is not None and d.proc.poll() is None

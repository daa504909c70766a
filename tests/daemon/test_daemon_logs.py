"""The daemon's stderr is one JSON object per line, whatever prints there.

A real face is swapped from a `file:` clip whose middle is damaged (PyAV decodes `file:` inputs
and keeps FFmpeg's own messages quiet, so the damage must not break the JSON either), MediaPipe's
mesh model runs on LiteRT (its XNNPACK delegate line),
one identity's stored texture has a damaged PNG chunk (libpng warns when it loads), and the
control API gets a malformed request. Nothing is faked but the damage.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.daemon.conftest import Daemon, add_identities
from tests.subcommands.test_logs import with_damaged_chunk

pytestmark = pytest.mark.slow


def test_daemon_stderr_is_only_json_lines_with_library_noise_captured(
        new_daemon: Callable[[], Daemon], face_clip: Path, astronaut_bgr: np.ndarray) -> None:
    from livecam.identity.library import IdentityLibrary

    d = new_daemon()
    names = add_identities(d, astronaut_bgr)
    library = IdentityLibrary(d.root / "data" / "livecam" / "identities")
    texture = next((library.root / "photos").glob("*/texture.png"))
    texture.write_bytes(with_damaged_chunk(texture.read_bytes()))
    data = bytearray(face_clip.read_bytes())
    for offset in range(len(data) // 3, len(data) // 3 + 3000, 97):
        data[offset] ^= 0xFF
    damaged_clip = d.root / "damaged.mp4"
    damaged_clip.write_bytes(bytes(data))

    d.start("--input", f"file:{damaged_clip}", "--output", "null", record=False)
    d.wait_ready(min_frames=10)
    for name in names:  # every identity loads once: one of them has the damaged texture
        assert d.ctl("select", name).returncode == 0
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /api/select HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        s.recv(1000)
    d.wait_ready(min_frames=d.status()["frames"]["sent"] + 75)  # the clip loops at least once
    d.stop()
    assert d.proc is not None and d.proc.returncode == 0
    err = d.stderr()
    records = []
    for line in err.splitlines():
        record = json.loads(line)  # fails on the first line that is not JSON
        assert {"t", "level", "logger", "msg"} <= record.keys()
        records.append(record)
    native = [r for r in records if r["logger"] == "native"]
    assert any("XNNPACK delegate" in r["msg"] and r["level"] == "INFO" for r in native)
    assert any(r["msg"].startswith("libpng warning") for r in native)
    assert any(r["msg"].startswith("stopped (SIGTERM)") for r in records)


@pytest.mark.parametrize(("config_text", "json_lines"), [
    ("", True),  # the daemon's default: JSON lines
    ("logging:\n  json: false\n", False),  # the config file's own choice is kept
])
def test_the_daemons_log_format_follows_its_config_file(tmp_path: Path, config_text: str,
                                                        json_lines: bool) -> None:
    """``advanced.logging.json: false`` in the daemon's config file was overridden by the daemon's
    JSON default (only ``--set`` could turn it off). Seen on a start refused at once (more
    streams than allowed), so no stream is started."""
    import subprocess
    import sys

    config = tmp_path / "daemon.yaml"
    config.write_text(config_text)
    result = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "daemon", "--config", str(config),
         "--set", "advanced.pipeline.max_streams=1", "--input", "synthetic", "--output", "null",
         "--input", "synthetic", "--output", "null"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    (line,) = [x for x in result.stderr.splitlines()
               if "more than advanced.pipeline.max_streams" in x]
    assert line.startswith("{") is json_lines, line

"""The thin client's controls act on its server session: `livecam run --remote URL` with its
global hotkeys on a real X server (Xvfb, keys pressed through XTEST as a keyboard makes them)
and its local control API, against a real `livecam serve` (subprocess, real aiortc on
loopback). Judged from the server: the session's own state on its Location."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.whip_session import (
    Server,
    logged_url,
    session_state,
    start_serve,
    wait_for,
)
from tests.output.conftest import XScreen, xscreen  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.display]


def _session_state(server: Server, location: str) -> dict[str, Any]:
    return session_state(location, server.tokens["alice"])


class ThinClient:
    """`livecam run --input synthetic --output null --remote URL` with hotkeys on ``display``."""

    def __init__(self, tmp_path: Path, server: Server, display: str, *args: str) -> None:
        token = tmp_path / "token"
        token.write_text(server.tokens["alice"])
        self.env = dict(os.environ, DISPLAY=display,
                        XDG_CONFIG_HOME=str(tmp_path / "client-config"),
                        XDG_DATA_HOME=str(tmp_path / "client-data"))
        self.log = tmp_path / "client.log"
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "livecam.cli", "run", "--input", "synthetic:320x240",
                 "--output", "null", "--remote", server.url, "--remote-token-file", str(token),
                 "--set", "control.api_address=127.0.0.1:0",
                 "--set", "advanced.pipeline.status_interval_s=0", *args],
                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                text=True)
        self.api = logged_url(self.log, "control API on", self.proc)

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "livecam.cli", "ctl", "--url", self.api,
                               *args], env=self.env, capture_output=True, text=True, timeout=60)

    def status(self) -> dict[str, Any]:
        done = self.ctl("--json", "status")
        return json.loads(done.stdout) if done.returncode == 0 else {}

    def remote(self) -> dict[str, Any]:
        remote: dict[str, Any] = self.status().get("remote_engines", {}).get("remote", {})
        return remote

    def quit(self) -> int:
        self.ctl("quit")
        return self.proc.wait(60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def test_hotkeys_and_ctl_of_the_thin_client_switch_the_server_session(
        tmp_path: Path, xscreen: XScreen) -> None:  # noqa: F811 (the imported fixture)
    server = start_serve(tmp_path / "server", max_sessions=1, hopper=True)
    client = ThinClient(tmp_path, server, xscreen.name)
    try:
        wait_for("hotkeys on", lambda: "hotkeys on:" in client.log.read_text(), client.log)
        # the session's stream runs and the local state took the server's identities
        wait_for("the server's identities", lambda: client.status().get("identities")
              == ["astro", "hopper"] and client.remote().get("identity") == "astro",
              client.log)
        location = client.remote()["session"]
        assert _session_state(server, location)["identity"] == "astro"

        xscreen.press("2", ("Control_L", "Alt_L"))  # keys_select[1]: the second identity
        wait_for("Ctrl+Alt+2 switched the session",
              lambda: _session_state(server, location)["identity"] == "hopper", client.log)
        xscreen.press("b", ("Control_L", "Alt_L"))  # key_bypass
        wait_for("Ctrl+Alt+B turned the session's bypass on",
              lambda: _session_state(server, location)["bypass"] is True, client.log)
        assert client.ctl("select", "astro").returncode == 0
        assert client.ctl("bypass", "off").returncode == 0
        wait_for("`livecam ctl` on the client switched the session back", lambda: (
            (s := _session_state(server, location))["identity"] == "astro"
            and s["bypass"] is False), client.log)
        # a name the server does not have is refused by the client's own API (not forwarded)
        assert client.ctl("select", "nobody").returncode != 0
        # a reload lists this machine's (empty) library: the server's names come back
        reload = client.ctl("--json", "reload")
        assert reload.returncode == 0 and "0 identities" in reload.stdout, reload
        wait_for("the server's identities restored", lambda: client.status().get(
            "identities") == ["astro", "hopper"], client.log)
        xscreen.press("2", ("Control_L", "Alt_L"))
        wait_for("Ctrl+Alt+2 after the reload",
                 lambda: _session_state(server, location)["identity"] == "hopper", client.log)
        assert client.remote()["session"] == location  # one session all along
        assert client.quit() == 0, client.log.read_text()[-3000:]
        # the local library is empty, but nothing passes through unswapped: no such warning
        assert "no identity in the library" not in client.log.read_text()
    finally:
        client.kill()
        server.stop()

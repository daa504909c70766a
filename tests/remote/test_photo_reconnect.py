"""A reconnecting thin client does not send its photo's bytes again while the server holds
them: `livecam run --remote URL --source PHOTO` (subprocess) against a real `livecam serve`
whose side ends the session three times (DELETE on its Location with the user's token, as
a server restart-free drop). Judged from the client's ``photo_bytes_sent`` and the server's
log; with ``advanced.serve.photo_keep_s=0`` every session sends the bytes again."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from tests.helpers.leak_clips import leak_clips, write_clip
from tests.helpers.whip_session import (
    Server,
    hopper_photo,
    quits_cleanly,
    start_serve,
    start_thin_client,
    wait_for,
)

pytestmark = pytest.mark.slow

_RECONNECTS = 3


def _photo_bytes_over_reconnects(server: Server, tmp_path: Path) -> int:
    """Photo bytes the thin client sent over ``_RECONNECTS`` sessions after its first."""
    clip_path = tmp_path / "clip.mp4"
    write_clip(leak_clips()["still_2"], clip_path)
    client = start_thin_client(
        tmp_path, server.url, "--input", f"file:{clip_path}", "--output", "null",
        "--source", str(hopper_photo()), "--set", "control.hotkeys=false",
        "--set", "advanced.capture.loop=true",
        env={"LIVECAM_REMOTE_TOKEN": server.tokens["alice"]})
    log, remote = client.log, client.remote

    def swapping_with_photo(sessions: int) -> bool:
        r = remote()
        return (r.get("sessions_made") == sessions and r.get("state") == "connected"
                and r.get("identity") == "source" and r.get("last_frame_age_s") is not None
                and r["last_frame_age_s"] < 0.5)

    with quits_cleanly(client):
        wait_for("the first session swaps with the photo", lambda: swapping_with_photo(1), log)
        first = remote()
        assert first["photo_bytes_sent"] >= hopper_photo().stat().st_size  # sent once
        for k in range(2, 2 + _RECONNECTS):
            location = remote()["session"]
            req = urllib.request.Request(location, method="DELETE", headers={
                "Authorization": f"Bearer {server.tokens['alice']}"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.status == 200
            wait_for(f"session {k} swaps with the photo", lambda k=k: swapping_with_photo(k),
                     log)
        sent = int(remote()["photo_bytes_sent"]) - int(first["photo_bytes_sent"])
    print(f"photo bytes sent over {_RECONNECTS} reconnects: {sent} "
          f"(the photo: {hopper_photo().stat().st_size} bytes)")
    return sent


def test_a_reconnect_sends_the_photos_hash_not_its_bytes(tmp_path: Path) -> None:
    server = start_serve(tmp_path / "serve", max_sessions=1, settings=(
        f"advanced.serve.photo_dir={tmp_path / 'photos'}",))
    try:
        sent = _photo_bytes_over_reconnects(server, tmp_path)
    finally:
        server.stop()
    assert sent < _RECONNECTS * 100  # one {"sha256": ...} per session
    assert server.log.read_text().count("from a photo it sent before") == _RECONNECTS


def test_with_photo_keep_s_0_every_session_sends_the_bytes(tmp_path: Path) -> None:
    server = start_serve(tmp_path / "serve", max_sessions=1, settings=(
        f"advanced.serve.photo_dir={tmp_path / 'photos'}", "advanced.serve.photo_keep_s=0"))
    try:
        sent = _photo_bytes_over_reconnects(server, tmp_path)
    finally:
        server.stop()
    assert sent >= _RECONNECTS * hopper_photo().stat().st_size
    assert "from a photo it sent before" not in server.log.read_text()

"""A `livecam serve` killed with SIGKILL while a session holds an uploaded photo: the next
start removes the session's photo folder, and only it (a user's folder and file in
``photo_dir`` stay). Real server subprocesses, a real aiortc session, Grace Hopper's photo."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.whip_session import hopper_photo, looped_session, start_serve

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")]


async def _upload_then_kill(url: str, token: str, kill: object) -> tuple[int, object]:
    frames = [np.zeros((240, 320, 3), np.uint8)]
    async with looped_session(url, token, frames) as client:
        status, reply = await client.session_call(
            "/photo", data=hopper_photo().read_bytes(), content_type="image/jpeg")
        assert callable(kill)
        kill()  # while the session is open: nothing ends it cleanly
        return status, reply


def test_a_crashed_servers_photo_folder_goes_at_the_next_start(tmp_path: Path) -> None:
    root = tmp_path / "serve"
    photos = tmp_path / "photos"
    photos.mkdir()
    user_dir = photos / "my-faces"
    user_dir.mkdir()
    (user_dir / "me.jpg").write_bytes(b"the user's")
    (photos / "notes.txt").write_text("the user's")
    settings = (f"advanced.serve.photo_dir={photos}",)
    server = start_serve(root, max_sessions=1, settings=settings)
    try:
        def kill() -> None:
            server.proc.kill()
            server.proc.wait(30)

        status, reply = asyncio.run(_upload_then_kill(server.url, server.tokens["alice"], kill))
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    assert status == 200, reply
    left = [p for p in photos.iterdir() if p.is_dir() and p != user_dir]
    assert len(left) == 1 and any(p.suffix == ".jpg" for p in left[0].iterdir()), left

    restarted = start_serve(root, max_sessions=1, prepared=True, settings=settings)
    try:
        assert not left[0].exists()
        assert sorted(p.name for p in photos.iterdir()) == ["my-faces", "notes.txt"]
        assert (user_dir / "me.jpg").read_bytes() == b"the user's"
        assert (photos / "notes.txt").read_text() == "the user's"
        assert "removed 1 photo folder(s)" in restarted.log.read_text()
    finally:
        restarted.stop()

"""A photo uploaded as a session's identity: `livecam run --remote URL --source PHOTO` (the
thin client, a subprocess) against a real `livecam serve` (subprocess, real aiortc on
loopback). The photo is Grace Hopper (matplotlib's sample JPEG); the server's own identity is
the astronaut. Judged from the server's session state, its photo folder, and the swapped
faces' dlib identity embeddings (nearer Hopper than the astronaut)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.helpers.leak_clips import decode, leak_clips, read_index, write_clip
from tests.helpers.whip_session import (
    Server,
    hopper_photo,
    looped_session,
    quits_cleanly,
    session_state,
    start_serve,
    start_thin_client,
    wait_for,
)

pytestmark = pytest.mark.slow

_MAX_PHOTO_BYTES = 200_000  # the server's limit here: Hopper's JPEG is 61 kB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    s = start_serve(root, max_sessions=2, settings=(
        f"advanced.serve.photo_dir={root / 'photos'}",
        f"advanced.serve.max_photo_bytes={_MAX_PHOTO_BYTES}"))
    yield s
    s.stop()


def _photo_dir(server: Server) -> Path:
    return Path(server.env["XDG_CONFIG_HOME"]).parent / "photos"


def _session_state(server: Server, location: str) -> dict[str, Any]:
    return session_state(location, server.tokens["alice"])


def _embedding(judge: Any, image: np.ndarray, box: np.ndarray | None = None) -> np.ndarray:
    import dlib

    if box is None:
        rects = dlib.get_frontal_face_detector()(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), 1)
        r = max(rects, key=lambda r: r.width())  # the astronaut's badge is a face too
        box = np.array([r.left(), r.top(), r.right(), r.bottom()])
    return np.asarray(judge.embed(image, box))


def test_the_thin_client_uploads_its_photo_and_the_session_swaps_to_it(
        server: Server, tmp_path: Path) -> None:
    clip = leak_clips()["still_2"]
    clip_path = tmp_path / "clip.mp4"
    truth = write_clip(clip, clip_path)
    photos = _photo_dir(server)
    photos.mkdir(parents=True, exist_ok=True)
    not_ours = photos / "kept.txt"  # something the server did not make: never deleted
    not_ours.write_text("the operator's")
    out = tmp_path / "out.mp4"
    client = start_thin_client(
        tmp_path, server.url, "--input", f"file:{clip_path}", "--output", f"file:{out}",
        "--source", str(hopper_photo()), "--set", "control.hotkeys=false",
        "--set", "advanced.capture.loop=true", "--set", "advanced.output.file_crf=14",
        token=server.tokens["alice"])
    log, status = client.log, client.status
    with quits_cleanly(client):
        wait_for("the session took the photo", lambda: (
            (r := status().get("remote_engines", {}).get("remote", {})).get("identity")
            == "source" and r.get("last_frame_age_s") is not None), log)
        doc = status()
        location = doc["remote_engines"]["remote"]["session"]
        assert doc["active_identity"] == "source"
        assert doc["identities"] == ["source", "astro"]  # the photo first, then the library
        state = _session_state(server, location)
        assert state["identity"].startswith("photo-"), state
        assert state["identities"] == ["astro", state["identity"]]
        folders = [p for p in photos.iterdir() if p.is_dir()]
        assert len(folders) == 1
        assert sorted(p.name for p in folders[0].iterdir()) == [".livecam-session", "1.jpg"]
        frames_then = doc["frames"]["sent"]
        wait_for("90 frames swapped with the photo", lambda: status()["frames"]["sent"]
              > frames_then + 90, log)
    # the session ended (the client's DELETE): its folder is gone, nothing else
    wait_for("the session's photo folder removed", lambda: not any(
        p.is_dir() for p in photos.iterdir()), server.log, timeout_s=60)
    assert not_ours.read_text() == "the operator's"

    from skimage import data

    from livecam.identity.face_judge import FaceJudge

    judge = FaceJudge()
    hopper = _embedding(judge, cv2.imread(str(hopper_photo())))
    astro = _embedding(judge, np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
    outputs = decode(out)[-90:]  # after the switch
    nearer_hopper = []
    for image in outputs:
        k = read_index(image)
        if k is None:
            continue
        for box in truth[k].boxes_xyxy:
            e = _embedding(judge, image, box)
            nearer_hopper.append(np.linalg.norm(e - hopper) < np.linalg.norm(e - astro))
    print(f"{len(nearer_hopper)} swapped faces judged: {sum(nearer_hopper)} nearer Hopper "
          "than the astronaut")
    assert len(nearer_hopper) > 60 and np.mean(nearer_hopper) > 0.8


async def _refusals(server: Server, bodies: dict[str, tuple[bytes, str, str]]
                    ) -> dict[str, tuple[int, str]]:
    """Each body posted to a fresh session's /photo as (data, content type, user)."""
    out: dict[str, tuple[int, str]] = {}
    frames = [np.zeros((240, 320, 3), np.uint8)]
    async with looped_session(server.url, server.tokens["alice"], frames) as client:
        for what, (data, kind, user) in bodies.items():
            client.token = server.tokens[user]
            status, reply = await client.session_call("/photo", data=data, content_type=kind)
            out[what] = (status, str(reply))
        client.token = server.tokens["alice"]  # alice ends her session
    return out


def test_bad_uploads_are_refused_with_the_reason(server: Server, tmp_path: Path) -> None:
    jpeg = hopper_photo().read_bytes()
    ok, no_face = cv2.imencode(".jpg", np.full((240, 320, 3), 128, np.uint8))
    assert ok
    got = asyncio.run(_refusals(server, {
        "bob's token": (jpeg, "image/jpeg", "bob"),
        "text": (b"hello", "text/plain", "alice"),
        "not a JPEG": (b"hello, not a photo", "image/jpeg", "alice"),
        "too large": (b"\xff\xd8\xff" + bytes(_MAX_PHOTO_BYTES), "image/jpeg", "alice"),
        "no face": (no_face.tobytes(), "image/jpeg", "alice"),
    }))
    codes = {what: status for what, (status, _) in got.items()}
    assert codes == {"bob's token": 404, "text": 415, "not a JPEG": 415, "too large": 413,
                     "no face": 422}, got
    assert "serve.max_photo_bytes" in got["too large"][1]
    assert "face" in got["no face"][1] and str(_photo_dir(server)) not in got["no face"][1]
    # the thin client refuses what is no photo before anything starts, in one line
    notes = tmp_path / "notes.txt"
    notes.write_text("not a photo")
    done = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "run", "--input", "synthetic", "--output",
         "null", "--remote", server.url, "--source", str(notes)],
        env=dict(server.env, LIVECAM_REMOTE_TOKEN=server.tokens["alice"]),
        capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"livecam: error: --source {notes} is not a JPEG or PNG photo: the server takes those"
    ], done.stderr


def test_a_photo_the_server_refuses_leaves_the_thin_client_on_the_cover(
        server: Server, tmp_path: Path) -> None:
    """A JPEG without a face passes the client's own check; the server refuses it (422): the
    client's status says so with the server's reason, and its output shows the cover (the
    clip's faces never come out: no other identity, no camera)."""
    _, no_face = cv2.imencode(".jpg", np.full((240, 320, 3), 128, np.uint8))
    photo = tmp_path / "wall.jpg"
    photo.write_bytes(no_face.tobytes())
    clip_path = tmp_path / "clip.mp4"
    write_clip(leak_clips()["still_2"], clip_path)
    out = tmp_path / "out.mp4"
    client = start_thin_client(
        tmp_path, server.url, "--input", f"file:{clip_path}", "--output", f"file:{out}",
        "--source", str(photo), "--set", "control.hotkeys=false",
        "--set", "advanced.capture.loop=true",
        env={"LIVECAM_REMOTE_TOKEN": server.tokens["alice"]})
    log, remote = client.log, client.remote
    with quits_cleanly(client):
        wait_for("the client saw the refusal", lambda: remote().get("state") == "refused", log)
        status = remote()
    assert "refused the photo (422)" in status["last_error"], status
    assert "face" in status["last_error"] and status["last_frame_age_s"] is None, status
    outputs = decode(out)
    assert outputs and all(read_index(image) is None for image in outputs)  # the cover only

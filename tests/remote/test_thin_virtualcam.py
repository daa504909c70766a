"""The thin client into a virtual camera whose device takes I420 (v4l2loopback's format):
`livecam run --input file:CLIP --remote URL --output virtualcam` against a real `livecam
serve` passing the frames back, with a recording backend registered as ``v4l2loopback`` in
the client process (tests/daemon/plugin). The camera is opened in I420 and every frame it gets
is a picture of the clip as I420 planes (the decoded planes, no BGR in between) or the cover."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.daemon.conftest import PLUGIN_DIR
from tests.helpers.leak_clips import leak_clips, write_clip
from tests.helpers.whip_session import quits_cleanly, start_serve, start_thin_client, wait_for

pytestmark = pytest.mark.slow


def test_the_thin_client_hands_a_yuv_virtual_camera_i420(tmp_path: Path) -> None:
    clip = leak_clips()["still_2"]
    clip_path = tmp_path / "clip.mp4"
    write_clip(clip, clip_path)
    sent = [image.astype(np.int16) for image, _ in clip.frames()]
    record = tmp_path / "camera"
    server = start_serve(tmp_path / "server", max_sessions=1, identity=None)  # passthrough
    env = {"PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]),
           "LIVECAM_TEST_RECORD_DIR": str(record), "LIVECAM_TEST_RECORD_AS": "v4l2loopback"}
    client = start_thin_client(
        tmp_path, server.url, "--input", f"file:{clip_path}", "--output", "virtualcam",
        "--set", "advanced.output.backend=v4l2loopback", "--set", "advanced.capture.loop=true",
        "--set", "control.hotkeys=false", token=server.tokens["alice"], env=env)
    try:
        with quits_cleanly(client):
            wait_for("frames came back", lambda: client.remote().get("last_frame_age_s")
                     is not None, client.log)
            frames_at_first = (record / "frames.raw").stat().st_size
            wait_for("60 more frames went to the camera", lambda: (
                (record / "frames.raw").stat().st_size > frames_at_first + 60 * 1280 * 1080),
                client.log)
    finally:
        server.stop()
    meta = json.loads((record / "meta.json").read_text())
    assert (meta["format"], meta["width"], meta["height"]) == ("I420", 1280, 720)
    raw = np.fromfile(record / "frames.raw", np.uint8)
    planes = raw[: raw.size // (1280 * 1080) * 1280 * 1080].reshape(-1, 1080, 1280)
    errors = []
    for frame in planes[-60:]:
        shown = cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_I420).astype(np.int16)
        if shown.mean() < 40:
            continue  # the cover card (dark), during a hiccup of the loaded host
        errors.append(min(float(np.abs(shown - s).mean()) for s in sent))
    print(f"{len(planes)} frames to the camera; error to the nearest clip frame "
          f"{np.round(errors, 1).tolist()}")
    assert len(errors) >= 30
    # a picture of the camera through H.264 both ways, not bytes of another layout
    assert max(errors) < 12, errors

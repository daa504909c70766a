"""The thin client, `livecam run --input file:CLIP --remote URL --output file:OUT`, against a
real `livecam serve` that is stopped mid-run and started again on the same port: the output
shows the swapped frames, then the cover (never the camera) while the link is down, then the
swapped frames again; the status says what happened. Judged from the output's pixels."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.leak_clips import decode, leak_clips, write_clip
from tests.helpers.leak_judge import judge
from tests.helpers.whip_session import quits_cleanly, start_serve, start_thin_client, wait_for

pytestmark = pytest.mark.slow


def test_the_output_shows_the_cover_while_the_link_is_down_then_reconnects(
        tmp_path: Path) -> None:
    clip = leak_clips()["still_2"]
    clip_path = tmp_path / "clip.mp4"
    truth = write_clip(clip, clip_path)
    server = start_serve(tmp_path / "server", max_sessions=1, restartable=True)
    out = tmp_path / "out.mp4"
    client = start_thin_client(
        tmp_path, server.url, "--input", f"file:{clip_path}", "--output", f"file:{out}",
        "--set", "advanced.capture.loop=true", "--set", "control.hotkeys=false",
        "--set", "advanced.output.file_crf=14", token=server.tokens["alice"])
    log, remote = client.log, client.remote
    restarted = None
    try:
        with quits_cleanly(client):
            wait_for("swapped frames came back",
                     lambda: remote().get("last_frame_age_s") is not None, log)
            covered_before = remote()["covered_frames"]
            server.stop()  # the link drops
            wait_for("the client saw the drop",
                     lambda: remote().get("state") == "reconnecting", log)
            wait_for("the cover went out",
                     lambda: remote()["covered_frames"] > covered_before + 10, log)
            restarted = start_serve(tmp_path / "server", max_sessions=1, port=server.port,
                                    prepared=True)
            wait_for("reconnected", lambda: remote().get("sessions_made", 0) >= 2
                     and remote().get("state") == "connected"
                     and remote()["last_frame_age_s"] < 0.5, log)
            final = remote()
    finally:
        if restarted is not None:
            restarted.stop()
        server.stop()
    text = log.read_text()
    assert "reconnecting" in text and "connected" in text
    assert final["last_error"], final
    report = judge(decode(clip_path), truth, decode(out))
    print(f"output {report.output_frames} frames: {report.black} cover, faces judged "
          f"{report.faces_judged}, leaked {report.leaks_counted}; status {final}")
    assert report.black > 10  # the cover, while the link was down (and before the first)
    assert report.faces_judged > 0 and report.leaks_counted == 0
    assert report.unreadable == 0  # every frame is a swapped frame or the cover

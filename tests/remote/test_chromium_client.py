"""A real headless Chromium as a WHIP client of `livecam serve`: its fake camera plays the leak
clip ``still_2`` from a .y4m file (``--use-file-for-fake-video-capture``), the page's
JavaScript posts the offer and shows the video that comes back; frames grabbed from the page's
<video> are judged from pixels (which input frame, leaked or not)."""

from __future__ import annotations

import base64
import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.helpers.leak_clips import leak_clips, read_index
from tests.helpers.leak_judge import judge
from tests.helpers.whip_session import Server, start_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="chromium is not installed (apt-get install chromium)"),
]

PAGE = """<!doctype html><body><video id=v autoplay muted playsinline></video><script>
async function whip(url, token) {
  const stream = await navigator.mediaDevices.getUserMedia(
      {video: {width: 1280, height: 720, frameRate: 30}});
  const pc = new RTCPeerConnection();
  const tr = pc.addTransceiver(stream.getVideoTracks()[0], {direction: 'sendrecv'});
  const params = tr.sender.getParameters();
  params.degradationPreference = 'maintain-resolution';
  await tr.sender.setParameters(params);
  pc.ontrack = e => { document.getElementById('v').srcObject = new MediaStream([e.track]); };
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise(r => { if (pc.iceGatheringState === 'complete') r();
    else pc.onicegatheringstatechange = () => pc.iceGatheringState === 'complete' && r(); });
  const resp = await fetch(url, {method: 'POST', body: pc.localDescription.sdp,
    headers: {'Content-Type': 'application/sdp', 'Authorization': 'Bearer ' + token}});
  const text = await resp.text();
  if (resp.status !== 201) return 'refused ' + resp.status + ': ' + text;
  window.location_ = resp.headers.get('Location');
  await pc.setRemoteDescription({type: 'answer', sdp: text});
  window.pc_ = pc;
  return 'ok';
}
function grab() {
  const v = document.getElementById('v');
  if (!v.videoWidth) return null;
  const c = document.createElement('canvas');
  c.width = v.videoWidth; c.height = v.videoHeight;
  c.getContext('2d').drawImage(v, 0, 0);
  return c.toDataURL('image/png');
}
</script></body>"""


def write_y4m(path: Path, frames: list[np.ndarray], fps: int = 30) -> None:
    """A raw 4:2:0 .y4m of BGR ``frames`` (Chromium's fake camera format)."""
    h, w = frames[0].shape[:2]
    with open(path, "wb") as fh:
        fh.write(f"YUV4MPEG2 W{w} H{h} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for frame in frames:
            fh.write(b"FRAME\n")
            fh.write(cv2.cvtColor(frame, cv2.COLOR_BGR2YUV_I420).tobytes())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(tmp_path_factory.mktemp("serve"), max_sessions=2)
    yield s
    s.stop()


def test_chromium_sends_its_camera_and_shows_the_swapped_video(server: Server,
                                                              tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    frames, truth = zip(*leak_clips()["still_2"].frames(), strict=True)
    y4m = tmp_path / "clip.y4m"
    write_y4m(y4m, list(frames))
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-video-capture={y4m}"]
    grabbed: list[np.ndarray] = []
    (tmp_path / "index.html").write_text(PAGE)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    page_url = f"http://127.0.0.1:{pages.server_address[1]}/index.html"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page()
            page.goto(page_url)  # a localhost page: a secure context, cross-origin to WHIP
            result = page.evaluate("([u, t]) => whip(u, t)", [server.url, server.tokens["alice"]])
            assert result == "ok", result
            page.wait_for_function("document.getElementById('v').videoWidth > 0",
                                   timeout=180_000)
            while len({read_index(g) for g in grabbed} - {None}) < 8:
                url = page.evaluate("grab()")
                if url is not None:
                    png = base64.b64decode(url.split(",", 1)[1])
                    grabbed.append(cv2.imdecode(np.frombuffer(png, np.uint8),
                                                cv2.IMREAD_COLOR))
                assert len(grabbed) < 2000, "no coded frame came back"
                page.wait_for_timeout(100)
            location = page.evaluate("window.location_")
        finally:
            browser.close()
            pages.shutdown()
            pages.server_close()
    assert location and location.startswith("/whip/")
    report = judge(list(frames), list(truth), grabbed)
    print(f"Chromium showed {len(grabbed)} frames: {report.black} black, "
          f"{report.unreadable} unreadable; faces judged {report.faces_judged}, leaked "
          f"{report.leaks_counted}")
    assert report.faces_judged > 0 and report.leaks_counted == 0
    assert report.unreadable == 0  # every frame shown is a swapped one or black

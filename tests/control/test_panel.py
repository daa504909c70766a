"""The control panel in a real headless Chromium (Debian's `chromium`, driven by playwright).

Clicking an identity must switch it (checked through /api/status, not the page), and the run
saves a screenshot of the page in the test's output folder.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.config import Config
from tests.control.conftest import Running, start_running

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="chromium is not installed (apt-get install chromium)"),
]


@contextmanager
def panel_page(url: str) -> Iterator[Any]:
    """The panel at ``url`` in headless Chromium, as narrow as an OBS dock (360 px)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 360, "height": 640})
            page.goto(url)
            yield page
        finally:
            browser.close()


class FacesCatalog:
    """Four real people from insightface's bundled group photo, one per identity button."""

    def __init__(self) -> None:
        from insightface.data import get_image

        group = get_image("t1")  # BGR, 1280x886, six people
        cascade = cv2.CascadeClassifier(cv2.data.haarcascades +  # type: ignore[attr-defined]
                                        "haarcascade_frontalface_default.xml")
        # faces here are 110-140 px wide; the size floor and 12 neighbours keep a hand out
        boxes = cascade.detectMultiScale(cv2.cvtColor(group, cv2.COLOR_BGR2GRAY), 1.2, 12,
                                         minSize=(90, 90))
        assert len(boxes) >= 3, "the group photo should show at least three faces"
        self._thumbs: dict[str, bytes] = {}
        for name, (x, y, w, h) in zip(("alice", "bob", "carol", "dave"),
                                      sorted(boxes.tolist())[:4], strict=False):
            crop = group[max(0, y - h // 4):y + h + h // 4, max(0, x - w // 4):x + w + w // 4]
            self._thumbs[name] = cv2.imencode(".jpg", cv2.resize(crop, (96, 96)))[1].tobytes()

    def names(self) -> tuple[str, ...]:
        return tuple(self._thumbs)

    def thumbnail_jpeg(self, name: str) -> bytes | None:
        return self._thumbs.get(name)


@pytest.fixture
def panel_app(fast_config: Config, tmp_path: Path, astronaut_bgr: np.ndarray
              ) -> Iterator[Running]:
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), cv2.resize(astronaut_bgr, (640, 360)))
    r = start_running(fast_config, tmp_path, FacesCatalog(), input_spec=f"image:{photo}")
    try:
        yield r
    finally:
        r.app.stop()


def test_clicking_an_identity_switches_it(panel_app: Running, tmp_path: Path) -> None:
    url = f"{panel_app.url}/panel?token={panel_app.token}"
    with panel_page(url) as page:
        page.wait_for_selector(".identity[data-name='carol']")
        assert panel_app.json("/api/status")["active_identity"] is None
        page.click(".identity[data-name='carol']")
        deadline = time.monotonic() + 60  # generous: a loaded host
        while panel_app.json("/api/status")["active_identity"] != "carol":
            assert time.monotonic() < deadline, "the click did not select carol"
            time.sleep(0.05)
        page.wait_for_selector(".identity.active[data-name='carol']")
        page.click("#bypass")
        page.wait_for_selector("#bypass.on")
        assert panel_app.json("/api/status")["bypass"] is True
        page.click("#prev")
        page.wait_for_selector(".identity.active[data-name='bob']")
        assert panel_app.json("/api/status")["active_identity"] == "bob"
        # the live preview and the thumbnails really loaded (not broken images)
        page.wait_for_function("document.getElementById('preview').naturalWidth > 0")
        assert page.evaluate("document.getElementById('preview').naturalWidth") == 320
        widths = page.evaluate("[...document.querySelectorAll('.identity img')]"
                               ".map(i => i.naturalWidth)")
        assert widths == [96] * len(widths) and len(widths) >= 3
        page.wait_for_selector("#conn:text('live')")
        shot = tmp_path / "control-panel.png"
        page.screenshot(path=str(shot), full_page=True)
    image = cv2.imread(str(shot))
    assert image is not None and image.shape[1] == 360
    print(f"panel screenshot: {shot}")


def test_panel_shows_overload_and_sets_the_delay(fast_config: Config, tmp_path: Path,
                                                 astronaut_bgr: np.ndarray) -> None:
    from tests.control.conftest import NAMES, PhotoCatalog
    from tests.control.test_overload_visible import SlowStage

    running = start_running(fast_config, tmp_path, PhotoCatalog(astronaut_bgr, NAMES),
                            stages=[SlowStage()])
    try:
        with panel_page(f"{running.url}/panel?token={running.token}") as page:
            # pushed by server-sent events once the monitor judges the first second
            page.wait_for_selector("#overload.on", timeout=60_000)
            assert "dropped" in page.inner_text("#overload")
            page.fill("#delay", "250")
            page.click("#setdelay")
            deadline = time.monotonic() + 60  # generous: a loaded host
            while running.json("/api/status")["delay_ms"] != 250:
                assert time.monotonic() < deadline, (
                    f"the panel did not set the delay (field {page.input_value('#delay')!r}, "
                    f"message {page.inner_text('#msg')!r})")
                time.sleep(0.05)
            page.wait_for_selector("#status >> text=250.0 ms")
            page.screenshot(path=str(tmp_path / "panel-overload.png"), full_page=True)
    finally:
        running.app.stop()


def test_a_typed_delay_is_kept_through_status_pushes_until_it_is_set(panel_app: Running) -> None:
    """Typed ms stay in the field until "set ms" sends them, whatever has the focus.

    A click on the button takes the focus off the field on mouse-down; a status push landing
    before mouse-up used to put the server's value back, and the click sent that instead
    (CI once saw the delay never change). Blurring the field and waiting for pushes makes
    that window as wide as we like.
    """
    with panel_page(f"{panel_app.url}/panel?token={panel_app.token}") as page:
        page.wait_for_selector("#conn:text('live')")
        page.fill("#delay", "250")
        page.evaluate("document.activeElement.blur()")
        # two status pushes rendered after the blur (the panel's own listener runs first)
        page.evaluate("""() => new Promise((done) => {
            let seen = 0;
            events.addEventListener("status", () => { if (++seen === 2) done(); });
        })""")
        assert page.input_value("#delay") == "250"
        page.click("#setdelay")
        deadline = time.monotonic() + 60  # generous: a loaded host
        while panel_app.json("/api/status")["delay_ms"] != 250:
            assert time.monotonic() < deadline, "the panel did not set the delay"
            time.sleep(0.05)
        # Enter in the field sends it too
        page.fill("#delay", "300")
        page.press("#delay", "Enter")
        while panel_app.json("/api/status")["delay_ms"] != 300:
            assert time.monotonic() < deadline, "Enter did not set the delay"
            time.sleep(0.05)


def test_panel_says_why_frames_pass_through(panel_app: Running) -> None:
    """With no identity chosen the real face is sent: the panel says so, in the words `livecam
    ctl status` prints after PASSTHROUGH (the status's `passthrough_reason`), until one is
    picked (issue 39 item 8: the panel showed nothing)."""
    reason = panel_app.json("/api/status")["passthrough_reason"]
    assert reason and "pass through" in reason
    with panel_page(f"{panel_app.url}/panel?token={panel_app.token}") as page:
        page.wait_for_selector("#passthrough.on", timeout=60_000)
        assert page.inner_text("#passthrough") == f"Passthrough: {reason}"
        page.click(".identity[data-name='carol']")
        page.wait_for_selector("#passthrough", state="hidden", timeout=60_000)
        assert panel_app.json("/api/status")["passthrough_reason"] is None
        assert page.inner_text("#passthrough") == ""

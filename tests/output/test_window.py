"""``livecam run --output window`` on a real X server (Xvfb), judged from the window's pixels.

The input is a clip whose every frame carries its own index as black/white bars, so a grab of
the window says which input frame is on the screen: frames seen are counted from pixels, not
from livecam's bookkeeping. Keys are typed into the focused window through XTEST, as a keyboard
would; the state they change is read from the control API, as `livecam ctl status` does.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import frame_code
from tests.output.conftest import XScreen

REPO = Path(__file__).resolve().parents[2]
SIZE_PX = (320, 240)
CLIP_FRAMES = 120  # 4 s at 30 fps, looped by the file source
BITS = 8  # the frame code (tests.helpers.frame_code): 8 bars of bits, 8 of complements


def coded_frame(index: int) -> np.ndarray:
    """(240, 320, 3) uint8 BGR: nothing but the code of ``index``."""
    return frame_code.coded_frame(index, size_px=SIZE_PX, bits=BITS)


def decode(image_bgr: np.ndarray) -> int | None:
    """The index shown in a grab of the window, or None (no frame drawn yet, a torn or blank
    image). The window may be scaled: bars are read at fractions of its width."""
    return frame_code.read_code(image_bgr, bits=BITS)


@pytest.fixture(scope="module")
def coded_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from livecam.output.sinks import FileSink

    path = tmp_path_factory.mktemp("clip") / "coded.mp4"
    sink = FileSink(path=path)
    sink.open(width=SIZE_PX[0], height=SIZE_PX[1], fps=30.0)
    try:
        for index in range(CLIP_FRAMES):
            sink.send(coded_frame(index))
    finally:
        sink.close()
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def livecam_run(xscreen: XScreen, tmp_path: Path, *args: str,
                hotkeys: bool = False) -> Iterator[subprocess.Popen[str]]:
    """`livecam run --output window ...` as a subprocess; global hotkeys off unless
    ``hotkeys`` (then a key typed into the window reaches livecam through both). Interrupted
    (Ctrl-C) if the test fails while it runs."""
    env = dict(os.environ, DISPLAY=xscreen.name, XDG_STATE_HOME=str(tmp_path / "state"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "livecam.cli", "run", "--output", "window",
         "--set", f"control.hotkeys={str(hotkeys).lower()}",
         "--set", f"identity.library_dir={tmp_path / 'lib'}", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    except BaseException:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise


def finish(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> tuple[int, str]:
    """(exit status, stderr) once livecam ends by itself."""
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError("livecam did not end by itself") from None
    return proc.returncode, err


@pytest.mark.display
@pytest.mark.slow
def test_window_shows_the_input_frames_and_the_run_ends_at_frames(
        xscreen: XScreen, coded_clip: Path, tmp_path: Path) -> None:
    with livecam_run(xscreen, tmp_path, "--input", f"file:{coded_clip}", "--frames", "450",
                     "--set", "control.api=false") as proc:
        window = xscreen.find_window("livecam")
        xscreen.manage(window)
        seen: list[int] = []
        # 20 distinct input frames, in the 15 s the run lasts (a handful of grabs per second
        # suffice: the property is which frames and in what order, not how many per second)
        while len(seen) < 20 and proc.poll() is None:
            try:
                index = decode(xscreen.grab_bgr(window))
            except Exception:  # the window went away: the run ended (checked below)
                break
            if index is not None and (not seen or index != seen[-1]):
                seen.append(index)
        rc, err = finish(proc)
    print(f"distinct input frames seen in the window: {len(seen)}")
    assert len(seen) >= 20, (seen, err[-2000:])
    assert all(0 <= i < CLIP_FRAMES for i in seen)
    # in input order: each new frame is later in the (looping) clip, never earlier; a step of
    # more than half the loop would be ambiguous (a grab stalled for 2 s)
    steps = [(b - a) % CLIP_FRAMES for a, b in itertools.pairwise(seen)]
    assert all(1 <= s <= CLIP_FRAMES // 2 for s in steps), seen
    assert rc == 0, err[-3000:]
    assert re.search(r"done: .*sent 450 frames", err), err[-2000:]


def add_identities(lib: Path, names: tuple[str, ...]) -> None:
    """Library identities from skimage's astronaut (a real face, one photo shared)."""
    import cv2
    from skimage import data

    from livecam.config.identity import IdentityConfig
    from livecam.identity import IdentityLibrary

    photo = lib.parent / "astronaut.png"
    astronaut = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    cv2.imwrite(str(photo), cv2.resize(astronaut, None, fx=2, fy=2,
                                       interpolation=cv2.INTER_CUBIC))
    library = IdentityLibrary(lib, IdentityConfig())
    for name in names:
        library.add(name, [photo], force=True)


def wait_for_a_frame(xscreen: XScreen, window: Any, proc: subprocess.Popen[str],
                     timeout_s: float = 240.0) -> None:
    """Until the window shows an input frame: its GUI loop is then running, drawing and reading
    keys. Typed before that, a key can reach a window the toolkit has not finished showing.
    The bound is for a hung run only: in a CI run beside the inductor's compile tests (its
    workers on every core) the first frame took more than 60 s to come."""
    deadline = time.monotonic() + timeout_s
    while decode(xscreen.grab_bgr(window)) is None:
        assert time.monotonic() < deadline and proc.poll() is None, "no frame was drawn"
        time.sleep(0.01)


def api_status(port: int, token_file: Path) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/status",
        headers={"Authorization": f"Bearer {token_file.read_text().strip()}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return dict(json.load(reply))


def wait_for_status(port: int, token_file: Path, proc: subprocess.Popen[str],
                    want: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    status: dict[str, Any] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = api_status(port, token_file)
        except OSError:  # the API is not up yet
            time.sleep(0.1)
            continue
        if all(status.get(k) == v for k, v in want.items()):
            return status
        time.sleep(0.02)
    raise AssertionError(f"state never became {want}; last status {status}")


@pytest.mark.display
@pytest.mark.slow
def test_keys_in_the_window_switch_identities_bypass_and_quit(
        xscreen: XScreen, coded_clip: Path, tmp_path: Path) -> None:
    add_identities(tmp_path / "lib", ("alice", "bob"))
    port, token_file = free_port(), tmp_path / "token"
    with livecam_run(xscreen, tmp_path, "--input", f"file:{coded_clip}", "--identity",
                     "alice", "--set", f"control.api_address=127.0.0.1:{port}",
                     "--set", f"advanced.control.token_file={token_file}") as proc:
        window = xscreen.find_window("livecam")
        xscreen.manage(window)
        wait_for_status(port, token_file, proc, {"active_identity": "alice", "bypass": False})
        wait_for_a_frame(xscreen, window, proc)
        xscreen.focus(window)
        for key, want in (("2", {"active_identity": "bob"}), ("n", {"active_identity": "alice"}),
                          ("p", {"active_identity": "bob"}), ("b", {"bypass": True}),
                          ("1", {"active_identity": "alice", "bypass": True})):
            xscreen.press(key)
            wait_for_status(port, token_file, proc, want)
        xscreen.press("q")
        rc, err = finish(proc)
    assert rc == 0, err[-3000:]


@pytest.mark.display
@pytest.mark.slow
def test_closing_the_window_ends_the_run(xscreen: XScreen, coded_clip: Path,
                                         tmp_path: Path) -> None:
    with livecam_run(xscreen, tmp_path, "--input", f"file:{coded_clip}",
                     "--set", "control.api=false") as proc:
        window = xscreen.find_window("livecam")
        xscreen.manage(window)
        wait_for_a_frame(xscreen, window, proc)
        xscreen.close_window(window)
        rc, err = finish(proc)
    assert rc == 0, err[-3000:]
    assert "preview window closed" in err and "Traceback" not in err


@pytest.mark.display
@pytest.mark.slow
def test_a_global_combo_pressed_in_the_window_acts_once(
        xscreen: XScreen, coded_clip: Path, tmp_path: Path) -> None:
    """Ctrl+Alt+B in the focused window reaches the global listener and the window (OpenCV
    reports it as a plain `b`): bypass must flip once, not twice."""
    add_identities(tmp_path / "lib", ("alice", "bob", "carol"))
    port, token_file = free_port(), tmp_path / "token"
    with livecam_run(xscreen, tmp_path, "--input", f"file:{coded_clip}", "--identity",
                     "alice", "--set", f"control.api_address=127.0.0.1:{port}",
                     "--set", f"advanced.control.token_file={token_file}", hotkeys=True) as proc:
        window = xscreen.find_window("livecam")
        xscreen.manage(window)
        start = wait_for_status(port, token_file, proc, {"active_identity": "alice"})
        wait_for_a_frame(xscreen, window, proc)
        xscreen.focus(window)
        xscreen.press("b", modifiers=("Control_L", "Alt_L"))
        wait_for_status(port, token_file, proc, {"bypass": True})
        xscreen.press("n", modifiers=("Control_L", "Alt_L"))
        wait_for_status(port, token_file, proc, {"active_identity": "bob"})
        xscreen.press("3")  # a window-only key, after every report of the presses above
        end = wait_for_status(port, token_file, proc, {"active_identity": "carol"})
        xscreen.press("q")
        rc, err = finish(proc)
    assert "hotkeys on:" in err  # both key sources were live (hotkeys start before the API)
    assert end["bypass"] is True and end["generation"] == start["generation"] + 3, err[-2000:]
    assert rc == 0, err[-3000:]

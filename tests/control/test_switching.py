"""Identity switching end to end, in one process: the control API → command queue → runtime
state → the real analysis (MediaPipe) and classic swap stages → the production virtual-camera
sink, recorded through a pyvirtualcam backend registered for the test (no v4l2loopback here).

The input is a ``file:`` clip of a real photo whose frames carry their own index; each frame
sent is judged by the input frame it came from against the command replies'
``first_frame_index`` (see tests/control/switch_judge.py), so the result does not depend on how
fast this host is."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.config import Config
from tests.control import switch_judge
from tests.control.conftest import Running
from tests.control.switch_judge import REAL, Applied, SentFrames, SentWatcher
from tests.helpers.virtualcam import Recording, register_recording_backend

pytestmark = pytest.mark.slow


class Drain(SentWatcher):
    """Moves the frames the recording camera received into ``sent`` (the test thread reduces
    them; the output thread only appends), so memory stays small however long the run."""

    def __init__(self, recording: Recording, sent: SentFrames) -> None:
        super().__init__(sent)
        self._recording = recording

    def poll(self) -> None:
        with self._recording.lock:
            frames, self._recording.frames = self._recording.frames, []
        for frame in frames:
            self.sent.add(frame)


def _add_identities(root: Path, tmp: Path) -> tuple[str, ...]:
    from insightface.data import get_image

    from livecam.identity.library import IdentityLibrary

    group = get_image("t1")  # six real people; two of them become identities
    library = IdentityLibrary(root)
    names = []
    for name, (x, y, w, h) in (("alice", (446, 269, 143, 143)), ("bob", (1116, 279, 117, 117))):
        photo = tmp / f"{name}.png"
        cv2.imwrite(str(photo), group[max(0, y - h // 2):y + 3 * h // 2,
                                      max(0, x - w // 2):x + 3 * w // 2])
        # small, slightly turned faces: accepted with quality warnings (force), as a user may
        library.add(name, [photo], force=True)
        names.append(name)
    return tuple(names)


@pytest.fixture(scope="module")
def coded_astronaut(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, Path]:
    from skimage import data

    base = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    clip = tmp_path_factory.mktemp("clip") / "astronaut.mp4"
    return base, switch_judge.write_clip(clip, base)


@pytest.fixture
def swapping(fast_config: Config, tmp_path: Path, coded_astronaut: tuple[np.ndarray, Path]
             ) -> Iterator[tuple[Running, Drain]]:
    from livecam.analysis import build_stages as analysis_stages
    from livecam.analysis.photo import analyze_photo
    from livecam.control.catalog import LibraryCatalog
    from livecam.identity.library import IdentityLibrary
    from livecam.swap.stage import ClassicSwapStage
    from tests.control.conftest import start_running

    base, clip = coded_astronaut
    names = _add_identities(tmp_path / "lib", tmp_path)
    config = dataclasses.replace(
        fast_config,
        identity=dataclasses.replace(fast_config.identity, library_dir=str(tmp_path / "lib")),
        output=dataclasses.replace(fast_config.output, backend="recording-switch"))
    recording = register_recording_backend("recording-switch")
    x1, y1, x2, y2 = analyze_photo(base).boxes_xyxy[0].astype(int)
    sent = SentFrames(base, (int(x1), int(y1), int(x2), int(y2)))
    stages = [*analysis_stages(config.analysis, fps=config.capture.fps),
              ClassicSwapStage(config.swap, IdentityLibrary(tmp_path / "lib"))]
    r = start_running(config, tmp_path, LibraryCatalog(config.identity),
                      input_spec=f"file:{clip}", output_spec="virtualcam", stages=stages)
    assert r.app.state.identities == names
    try:
        yield r, Drain(recording, sent)
    finally:
        r.app.stop()


def _command(r: Running, look: str, path: str, body: dict[str, Any]) -> Applied:
    reply = r.json(path, method="POST", body=body)
    assert reply["applied"]
    return Applied(look, int(reply["frames_sent_at_apply"]), int(reply["first_frame_index"]))


def test_select_and_bypass_apply_from_the_first_frame_under_the_new_state(
        swapping: tuple[Running, Drain], tmp_path: Path) -> None:
    r, recorded = swapping
    recorded.wait_for_index(0)
    # judge switches once the face is tracked (before, there is no face to swap)
    deadline = time.monotonic() + 180
    while not r.json("/api/status")["tracks"]:
        assert time.monotonic() < deadline, "the face in the clip was never tracked"
        time.sleep(0.05)
    applied = []
    for look, path, body in (("alice", "/api/select", {"name": "alice"}),
                             ("bob", "/api/select", {"name": "bob"}),
                             (REAL, "/api/bypass", {"on": True})):
        applied.append(_command(r, look, path, body))
        # frames captured under the new state were sent showing it (after the cover while a
        # new identity loads, which takes time, not frames): enough to judge by
        recorded.wait_shown(applied[-1])
    report = switch_judge.judge(recorded.sent, applied, initial=REAL,
                                threads=r.app.config.pipeline.threads)
    report["status"] = r.json("/api/status")
    (tmp_path / "switching.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"commands {applied}: {report}")

"""The GPU swap hub's threads: a stream's ``submit`` only queues its frame; the tick (rows,
uploads, the generator) runs on the hub's launcher thread, so many streams never wait behind
each other's ticks under the hub's lock (issue 41: 16 streams' pipeline threads spent half
their time there). On the CPU, with the stand-in generator (the real one is a download)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from livecam.core.types import RuntimeState
from livecam.gpupipe.stage import GpuSwapStage
from tests.gpupipe.conftest import FaceFrame
from tests.gpupipe.test_stage import (
    Generator,
    collect_all,
    embedding_table,
    faces_of,
    make_hub,
    packet,
)


class HeldGenerator(Generator):
    """Records which thread runs each generator call after ``watch`` is set, and holds the
    calls of any thread but ``caller`` until ``release`` is set."""

    def __init__(self, path: Path, caller: threading.Thread) -> None:
        super().__init__(path)
        self.caller = caller
        self.watch, self.release = threading.Event(), threading.Event()
        self.threads: list[str] = []

    def run_torch(self, feeds: Any, stream: Any = None) -> Any:
        if self.watch.is_set():
            self.threads.append(threading.current_thread().name)
            if threading.current_thread() is not self.caller:
                self.release.wait(60.0)
        return super().run_torch(feeds, stream)


def test_submit_queues_and_the_launcher_thread_runs_the_tick(inswapper_dyn_path: Path,
                                                             face_frame: FaceFrame) -> None:
    generator = HeldGenerator(inswapper_dyn_path, threading.current_thread())
    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), []), generator=generator)
    state = RuntimeState(active_identity="alice")
    with GpuSwapStage(hub) as stage:
        generator.watch.set()
        # both return while the first tick is held inside the generator
        stage.submit(packet(0, face_frame.frame_bgr, faces_of(face_frame), state))
        stage.submit(packet(1, face_frame.frame_bgr, faces_of(face_frame), state))
        generator.release.set()
        out = collect_all(stage, 2)
    assert [p.frame.index for p in out] == [0, 1]
    assert all(p.image_bgr is not None and (p.image_bgr != face_frame.frame_bgr).any()
               for p in out)
    assert generator.threads and set(generator.threads) == {"livecam-gpu-launch"}

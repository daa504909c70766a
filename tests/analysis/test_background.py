"""The background detector's worker: lower priority than the frame path, and load errors
reported to the caller of open()."""

from __future__ import annotations

import os
import sys

import pytest

from livecam.analysis.background import BackgroundDetector
from livecam.analysis.detect import BlazeFaceDetector


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux-only; the code "
                    "leaves the priority alone elsewhere")
def test_worker_runs_at_a_lower_priority_than_the_pipeline_thread() -> None:
    background = BackgroundDetector(BlazeFaceDetector())
    base = os.getpriority(os.PRIO_PROCESS, 0)
    background.open()
    try:
        worker = background._thread
        assert worker is not None and worker.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, worker.native_id) == min(19, base + 10)
        assert os.getpriority(os.PRIO_PROCESS, 0) == base  # the caller is untouched
    finally:
        background.close()


def test_a_detector_that_fails_to_load_fails_open() -> None:
    class Broken(BlazeFaceDetector):
        def open(self) -> None:
            raise RuntimeError("model file damaged")

    background = BackgroundDetector(Broken())
    with pytest.raises(RuntimeError, match="model file damaged"):
        background.open()
    assert background._thread is None


def test_close_does_not_wait_for_a_search_in_progress() -> None:
    """Issue 39 item 15: close joined the worker, whose search (at nice +10) waited up to
    0.64 s for a core on a saturated machine, all of it inside a SIGTERM's stop. Now close
    returns while the search runs and the worker closes the detector when it ends. The
    real detector, held inside its search by a gate (a search that is still running,
    deterministically, whatever the host's speed)."""
    import threading

    import numpy as np

    entered, release, closed = threading.Event(), threading.Event(), threading.Event()

    class Gated(BlazeFaceDetector):
        def search(self, image_bgr, *, all_tiles=False):  # type: ignore[no-untyped-def]
            entered.set()
            release.wait(60)
            return super().search(image_bgr, all_tiles=all_tiles)

        def close(self) -> None:
            super().close()
            closed.set()

    background = BackgroundDetector(Gated())
    background.open()
    try:
        assert background.submit(0, np.zeros((240, 320, 3), np.uint8))
        assert entered.wait(60)
        background.close()  # before: blocked here until the search ended
        assert not closed.is_set()  # the search still runs: its detector stays open
    finally:
        release.set()
    assert closed.wait(60), "the worker did not close the detector after its search"

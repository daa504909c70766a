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

"""Live reloads: what a reload cannot change in a running process is said, not dropped."""

from __future__ import annotations

import dataclasses
import logging
import time

import pytest

from livecam.app import App
from livecam.capture.sources import SyntheticSource
from livecam.config import load_config
from livecam.output.sinks import NullSink
from livecam.pipeline.passthrough import PassThrough


def test_a_reload_that_changes_the_streams_says_it_needs_a_restart(
        caplog: pytest.LogCaptureFixture) -> None:
    """Editing the ``streams:`` list and sending SIGHUP kept the running streams and said
    only "reloaded": the user believed the new list was running."""
    config = load_config(None, ["advanced.pipeline.status_interval_s=0"])
    edited = dataclasses.replace(config, streams=({"input": "synthetic:64x48",
                                                   "output": "null"},))
    app = App(config, source=SyntheticSource(width=64, height=48, fps=30.0), sink=NullSink(),
              stages=[PassThrough()], config_loader=lambda: edited, stream=1)
    caplog.set_level(logging.INFO, logger="livecam.pipeline.reload")
    app.start()
    try:
        app.request_reload()
        deadline = time.monotonic() + 60
        while not any("reloaded in" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "the reload never finished"
            time.sleep(0.05)
    finally:
        app.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # one such line per stream, each saying which
    assert any(w.startswith("stream 1: config section 'streams' changed: restart livecam")
               for w in warnings), warnings

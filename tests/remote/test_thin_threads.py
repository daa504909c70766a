"""The thin client's pipeline threads: its one stage runs on the scheduler's own thread."""

from __future__ import annotations

import threading
import time

from livecam.app import RemoteSwap, build_remote_streams
from livecam.config import load_config


def test_the_thin_client_runs_its_stage_without_a_second_pipeline_thread() -> None:
    # advanced.pipeline.threads defaults to 2: with the remote stage alone, the second thread
    # would only pass each frame on to the output
    config = load_config(None, ["advanced.pipeline.status_interval_s=0", "control.hotkeys=false",
                                "control.api_address=127.0.0.1:0"])
    assert config.pipeline.threads == 2
    streams = build_remote_streams(config, pairs=[("synthetic:64x48", "null")],
                                   remote=RemoteSwap("http://127.0.0.1:9/whip", "token"))
    (app,) = streams.apps
    assert app.config.pipeline.threads == 1
    before = {t.ident for t in threading.enumerate()}
    streams.start()
    try:
        deadline = time.monotonic() + 60
        while app.summary().processed < 5:  # covered: no server at that address
            assert time.monotonic() < deadline, "the output sent no frames"
            time.sleep(0.01)
        started = [t.name for t in threading.enumerate() if t.ident not in before]
    finally:
        streams.stop()
    assert "livecam-pipeline" in started, started
    assert not [n for n in started if n.startswith("livecam-pipeline-")], started

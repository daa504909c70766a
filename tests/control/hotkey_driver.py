"""Run under Xvfb by test_hotkeys.py: a real app with production control wiring (global
hotkeys via pynput), driven by pynput's keyboard Controller. Prints one JSON line of results."""

from __future__ import annotations

import json
import sys
import time

from pynput.keyboard import Controller

from livecam.app import build_app
from livecam.config import load_config
from livecam.core.types import RuntimeState


def main() -> None:
    config = load_config(None, ["pipeline.status_interval_s=0", "control.api=false"])
    app = build_app(config, input_spec="synthetic:160x120", output_spec="null", controls=True,
                    state=RuntimeState(identities=("alice", "bob", "carol")))
    app.start()
    keyboard = Controller()
    results: list[dict[str, object]] = []
    try:
        hotkeys_active = any(getattr(c, "active", False) for c in app.controls)
        for key in ["2", "]", "]", "[", "b", "1", "b", "9"]:
            generation = app.state.generation
            t0 = time.perf_counter()
            keyboard.press(key)
            keyboard.release(key)
            while app.state.generation == generation and time.perf_counter() - t0 < 2.0:
                time.sleep(0.005)
            results.append({"key": key, "active": app.state.active_identity,
                            "bypass": app.state.bypass,
                            "ms": round((time.perf_counter() - t0) * 1000, 1),
                            "changed": app.state.generation != generation})
    finally:
        app.stop()
    json.dump({"hotkeys_active": hotkeys_active, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()

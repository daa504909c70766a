"""A/V delay: delivered capture→output delay against the set `output.delay_ms`, 10 s each.

    python -m scripts.measure_av_delay [--seconds 10] [--json out/av_delay.json]

Builds the app exactly as `livecam run` does (``build_app`` with the controls: synthetic input
640x360 at 30 fps, the null output, the control API on a free port), and for each delay sets
it live through the API (`POST /api/delay`, what `livecam ctl delay MS` sends), lets it settle
for 2 s, then takes the capture→sink time of every new frame sent for ``--seconds``. Prints a
table (delivered p1/p50/p99/max, the share within one frame of the set value) and writes JSON.
Timing on a shared host drifts with load: run it twice.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from livecam.app import build_app
from livecam.config import load_config
from livecam.core.types import RuntimeState

FPS = 30.0
FRAME_MS = 1000 / FPS
DELAYS_MS = (0.0, 40.0, 100.0, 250.0, 500.0, 1000.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path, default=Path("out/av_delay.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "api-token"
        config = load_config(None, ["advanced.pipeline.status_interval_s=0", f"capture.fps={FPS:g}",
                                    "control.hotkeys=false", "control.api_address=127.0.0.1:0",
                                    f"advanced.control.token_file={token_file}",
                                    f"identity.library_dir={Path(tmp) / 'library'}"])
        app = build_app(config, input_spec="synthetic:640x360", output_spec="null",
                        controls=True, hotkeys=False, api_required=True,
                        state=RuntimeState())
        app.start()
        try:
            server = next(c for c in app.controls if hasattr(c, "url"))
            url, token = server.url, token_file.read_text().strip()  # type: ignore[attr-defined]
            rows = [measure(app, url, token, delay, args.seconds) for delay in DELAYS_MS]
        finally:
            app.stop()
    print(f"\n{'set ms':>7} {'frames':>6} {'p1':>7} {'p50':>7} {'p99':>7} {'max':>7} "
          f"{'p50-set':>8} {'within 1 frame':>15}")
    for r in rows:
        print(f"{r['set_ms']:7.0f} {r['frames']:6d} {r['p1_ms']:7.1f} {r['p50_ms']:7.1f} "
              f"{r['p99_ms']:7.1f} {r['max_ms']:7.1f} {r['p50_ms'] - r['set_ms']:8.1f} "
              f"{r['within_one_frame']:15.1%}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"fps": FPS, "seconds": args.seconds, "rows": rows},
                                    indent=1))
    print(f"wrote {args.json}")
    return 0


def measure(app: object, url: str, token: str, delay_ms: float, seconds: float) -> dict:
    metrics = app.metrics  # type: ignore[attr-defined]
    req = urllib.request.Request(f"{url}/api/delay", data=json.dumps({"ms": delay_ms}).encode(),
                                 method="POST", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["applied"]
    time.sleep(2.0)  # frames captured before the change have left
    new0 = metrics.counter("sent") - metrics.counter("repeated")
    time.sleep(seconds)
    new = metrics.counter("sent") - metrics.counter("repeated") - new0
    delivered = np.array(metrics.latencies_ms()[-new:])
    error = delivered - delay_ms
    return {"set_ms": delay_ms, "frames": int(new),
            "p1_ms": float(np.percentile(delivered, 1)),
            "p50_ms": float(np.percentile(delivered, 50)),
            "p99_ms": float(np.percentile(delivered, 99)), "max_ms": float(delivered.max()),
            "early_frames": int((error < 0).sum()) if delay_ms else 0,
            "within_one_frame": float((np.abs(error) <= FRAME_MS).mean())}


if __name__ == "__main__":
    raise SystemExit(main())

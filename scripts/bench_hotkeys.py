"""Key-to-state time of the global hotkeys, through `livecam run` as a user runs it.

Starts `livecam run --input synthetic --output null` with three library identities (skimage's
astronaut under three names) and the control API on a free port, presses Ctrl+Alt+1/2/3 in turn
from this other process through XTEST (device-level key events, as a physical keyboard makes;
pynput's own Controller sends characters with XSendEvent, which only a listener in the same
process sees), and times each press until
`/api/status` (what `livecam ctl status` reads) shows the new identity. Needs an X display with
RECORD; here:

    xvfb-run -a -s "-screen 0 640x480x24 +extension RECORD" python -m scripts.bench_hotkeys

Prints a table and writes JSON (--json). The time includes the pipeline applying the command
between two frames (up to one frame interval at 30 fps) and the HTTP poll (every ~2 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

NAMES = ("alice", "bob", "carol")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def add_identities(lib: Path) -> None:
    import cv2
    import numpy as np
    from skimage import data

    from livecam.config.identity import IdentityConfig
    from livecam.identity import IdentityLibrary

    photo = lib.parent / "astronaut.png"
    astronaut = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    cv2.imwrite(str(photo), astronaut)
    library = IdentityLibrary(lib, IdentityConfig())
    for name in NAMES:
        library.add(name, [photo], force=True)


def status(port: int, token: str) -> dict[str, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5) as reply:
        return dict(json.load(reply))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presses", type=int, default=20)
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args()
    if not os.environ.get("DISPLAY"):
        print("needs an X display: run under xvfb-run (see the module docstring)",
              file=sys.stderr)
        return 2
    from Xlib import XK, X, display
    from Xlib.ext import xtest

    x = display.Display()

    def key(name: str, down: bool) -> None:
        code = x.keysym_to_keycode(XK.string_to_keysym(name))
        xtest.fake_input(x, X.KeyPress if down else X.KeyRelease, code)
        x.sync()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        add_identities(root / "lib")
        port, token_file = free_port(), root / "token"
        env = dict(os.environ, XDG_CONFIG_HOME=str(root / "c"), XDG_DATA_HOME=str(root / "d"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "livecam.cli", "run", "--input", "synthetic:640x360",
             "--output", "null", "--set", f"identity.library_dir={root / 'lib'}",
             "--set", f"control.api_address=127.0.0.1:{port}",
             "--set", f"advanced.control.token_file={token_file}",
             "--set", "advanced.pipeline.status_interval_s=0"],
            env=env, stderr=subprocess.PIPE, text=True)
        hotkeys_on, api_on = threading.Event(), threading.Event()

        def read_log() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                if "hotkeys on:" in line:
                    hotkeys_on.set()
                if "control API on" in line:
                    api_on.set()

        threading.Thread(target=read_log, daemon=True).start()
        times_ms: list[float] = []
        try:
            if not (hotkeys_on.wait(120) and api_on.wait(30)):
                raise SystemExit("livecam run did not start its hotkeys and API")
            doc = status(port, token_file.read_text().strip())
            for k in range(args.presses):
                want = NAMES[(k + 1) % len(NAMES)]
                digit = str(NAMES.index(want) + 1)
                token = token_file.read_text().strip()
                key("Control_L", True)
                key("Alt_L", True)
                t0 = time.perf_counter()
                key(digit, True)
                key(digit, False)
                while doc["active_identity"] != want:
                    if time.perf_counter() - t0 > 5:
                        raise SystemExit(f"Ctrl+Alt+{digit} did not select {want}: {doc}")
                    doc = status(port, token)
                    time.sleep(0.002)
                times_ms.append((time.perf_counter() - t0) * 1000)
                key("Alt_L", False)
                key("Control_L", False)
                time.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    result = {"presses": len(times_ms), "median_ms": statistics.median(times_ms),
              "max_ms": max(times_ms), "min_ms": min(times_ms), "times_ms": times_ms,
              "input": "synthetic:640x360 at 30 fps, 3 identities, classic swap stages"}
    print("| presses | median ms | max ms | min ms |\n|---|---|---|---|")
    print(f"| {result['presses']} | {result['median_ms']:.1f} | {result['max_ms']:.1f} | "
          f"{result['min_ms']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Test-only plugin for daemon subprocesses: a recording pyvirtualcam backend.

This machine (like CI) has no v4l2loopback device, so the real virtual-camera backend cannot
open. Tests put this folder on PYTHONPATH; Python imports ``sitecustomize`` at start-up, which
registers backend ``recording`` through pyvirtualcam's public ``register_backend`` seam. The
daemon then runs its production ``VirtualCamSink`` path unchanged (``--output virtualcam
--set advanced.output.backend=recording``) and every frame it sends is appended, raw BGR, to
``$LIVECAM_TEST_RECORD_DIR/frames.raw`` with the size in ``meta.json``.

``LIVECAM_TEST_RECORD_AS=v4l2loopback`` registers it under that name instead, in place of
pyvirtualcam's own (a thin client opens such a camera in I420): it then takes I420 frames
too, and ``meta.json`` says which (``"format": "BGR"`` or ``"I420"``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_NAME = os.environ.get("LIVECAM_TEST_RECORD_AS", "recording")

if os.environ.get("LIVECAM_TEST_RECORD_DIR"):
    import pyvirtualcam

    class RecordingCamera:
        def __init__(self, *, width: int, height: int, fps: float, fourcc: int,
                     device: str | None, **kw: object) -> None:
            formats = {pyvirtualcam.camera.encode_fourcc(f.value): f.name
                       for f in (pyvirtualcam.PixelFormat.BGR, pyvirtualcam.PixelFormat.I420)}
            if fourcc not in formats or (formats[fourcc] != "BGR" and _NAME == "recording"):
                raise RuntimeError(f"recording backend expects BGR frames, got {fourcc}")
            folder = Path(os.environ["LIVECAM_TEST_RECORD_DIR"])
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "meta.json").write_text(json.dumps(
                {"width": width, "height": height, "fps": fps, "pid": os.getpid(),
                 "format": formats[fourcc]}))
            self._file = open(folder / "frames.raw", "ab")  # noqa: SIM115 - closed in close()
            self._device = device or "recording0"

        def send(self, frame: object) -> None:
            self._file.write(memoryview(frame))  # type: ignore[arg-type]
            self._file.flush()

        def close(self) -> None:
            self._file.close()

        def device(self) -> str:
            return self._device

        def native_fourcc(self) -> None:
            return None

    pyvirtualcam.register_backend(_NAME, RecordingCamera)

"""Lock files that keep two livecam daemons off the same camera or virtual camera.

One ``flock``-ed file per device in the lock dir (``$XDG_RUNTIME_DIR/livecam`` by default).
The kernel drops the lock when the process dies, however it dies, so a stale file never blocks
a restart; the file only keeps the holder's pid for the error message.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import IO

from livecam.core.errors import LivecamError

log = logging.getLogger(__name__)


class DeviceBusyError(LivecamError, RuntimeError):
    """Another livecam holds the lock of a device this run needs."""


def default_lock_dir() -> Path:
    import warnings

    import platformdirs

    with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set": the fallback is fine
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("livecam", appauthor=False))


def device_keys(input_spec: str, output_spec: str, *, output_device: str = "",
                output_backend: str = "") -> list[tuple[str, str]]:
    """(lock key, what to call it) for the devices an ``--input``/``--output`` pair uses.

    Only cameras and virtual cameras are exclusive; files, images, windows are not locked.
    ``camera:0`` and ``camera:/dev/video0`` are the same device on Linux and get one key.
    """
    keys: list[tuple[str, str]] = []
    kind, _, target = input_spec.partition(":")
    if kind == "camera":
        device = target
        if target.isdigit() and sys.platform.startswith("linux"):
            device = f"/dev/video{target}"
        keys.append((f"camera-{device}", f"camera {device}"))
    if output_spec == "virtualcam":
        backend = output_backend or "default"
        device = output_device or "default"
        keys.append((f"virtualcam-{backend}-{device}",
                     f"virtual camera {device} ({backend} backend)"))
    return keys


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_") + ".lock"


class DeviceLock:
    """Holds the locks for ``keys`` from ``acquire`` until ``release`` (idempotent).

    ``acquire`` raises :class:`DeviceBusyError` naming the holder's pid when one is taken, and
    then holds none of them.
    """

    def __init__(self, keys: list[tuple[str, str]], lock_dir: Path) -> None:
        self._keys = keys
        self._dir = lock_dir
        self._held: list[IO[str]] = []

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: the OBS virtual camera refuses a second writer itself
            log.info("device locks are not available on this platform")
            return
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for key, label in self._keys:
            path = self._dir / _file_name(key)
            fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.seek(0)
                holder = fh.read().strip() or "?"
                fh.close()
                self.release()
                raise DeviceBusyError(
                    f"{label} is already used by another livecam (pid {holder}; lock {path}): "
                    "stop that one first, or pick another device with --input / "
                    "--set output.device=...") from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            self._held.append(fh)
            log.debug("locked %s (%s)", label, path)

    def release(self) -> None:
        for fh in self._held:
            fh.close()  # closing drops the flock
        self._held = []

"""Where model files live, and the rule that an unverified file is never loaded.

:class:`ModelStore` keeps each model as ``<models_dir>/<manifest.file>``. A file is usable only
when its sha256 is one the manifest accepts, or -- for models no public source documents a hash
for -- equals the hash recorded when it was first fetched or imported (``<file>.sha256.json``,
which also lets later starts skip re-hashing an unchanged file). A file that fails is moved to
``<models_dir>/rejected/`` (kept for inspection, never deleted) and a :class:`ModelError` says
what to do.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from livecam.core.errors import ModelError, UsageError
from livecam.engines.manifest import ModelManifest

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def default_models_dir() -> Path:
    """The per-user data directory for models (platformdirs), e.g. ~/.local/share/livecam/models."""
    import platformdirs

    return Path(platformdirs.user_data_dir("livecam", appauthor=False)) / "models"


@dataclass(frozen=True)
class ModelStatus:
    name: str
    path: Path
    present: bool
    verified: bool
    sha256: str | None
    detail: str


class ModelStore:
    """Model files under ``models_dir`` described by ``manifests`` (name -> manifest).

    Cheap to construct; methods touch the disk. Any thread may call them, one at a time per file.
    """

    def __init__(self, models_dir: str | Path, manifests: Mapping[str, ModelManifest]) -> None:
        self.models_dir = Path(models_dir)
        self.manifests = dict(manifests)

    def manifest(self, name: str) -> ModelManifest:
        try:
            return self.manifests[name]
        except KeyError:
            known = ", ".join(sorted(self.manifests)) or "none"
            raise UsageError(f"unknown model {name!r} (known: {known}; see "
                             "`livecam models list`)") from None

    def path(self, name: str) -> Path:
        return self.models_dir / self.manifest(name).file

    def partial_path(self, name: str) -> Path:
        return self.path(name).with_name(self.path(name).name + ".part")

    def _stamp_path(self, name: str) -> Path:
        return self.path(name).with_name(self.path(name).name + ".sha256.json")

    def _read_stamp(self, name: str) -> dict[str, object] | None:
        try:
            stamp = json.loads(self._stamp_path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return stamp if isinstance(stamp, dict) else None

    def write_stamp(self, name: str, sha256: str) -> None:
        """Record that the file at :meth:`path` has ``sha256`` (its size and mtime too)."""
        st = self.path(name).stat()
        stamp = {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        self._stamp_path(name).write_text(json.dumps(stamp), encoding="utf-8")

    def acceptable(self, name: str, sha256: str) -> bool:
        """Whether a file with ``sha256`` may be used as model ``name``."""
        accepted = self.manifest(name).accepted_sha256
        if accepted:
            return sha256 in accepted
        stamp = self._read_stamp(name)
        return stamp is None or stamp.get("sha256") == sha256

    def quarantine(self, path: Path, sha256: str) -> Path:
        """Move a file that failed verification to ``rejected/``; returns where it went."""
        rejected = self.models_dir / "rejected"
        rejected.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = rejected / f"{path.name}.{sha256[:12]}.{stamp}"
        os.replace(path, target)
        log.warning("moved %s aside to %s (sha256 %s did not verify)", path, target, sha256)
        return target

    def _mismatch(self, name: str, path: Path, sha256: str) -> ModelError:
        manifest = self.manifest(name)
        moved = self.quarantine(path, sha256)
        self._stamp_path(name).unlink(missing_ok=True)
        expected = ", ".join(sorted(manifest.accepted_sha256)) or "the hash recorded earlier"
        return ModelError(
            f"model {name}: {path.name} has sha256 {sha256}, expected {expected}; it was not "
            f"loaded and was moved to {moved}. Run `livecam models fetch {name}` again, or "
            f"`livecam models import {name} PATH` with a good copy")

    def verify(self, name: str, *, force: bool = False) -> str:
        """Check the installed file; returns its sha256 or raises :class:`ModelError`.

        Re-hashes only when the file's size or mtime changed since the last check (or
        ``force``). A file that does not verify is moved aside (see :meth:`quarantine`).
        """
        path = self.path(name)
        if not path.is_file():
            raise self.missing_error(name)
        stamp = self._read_stamp(name)
        st = path.stat()
        if (not force and stamp is not None and stamp.get("size") == st.st_size
                and stamp.get("mtime_ns") == st.st_mtime_ns
                and isinstance(stamp.get("sha256"), str)
                and self.acceptable(name, str(stamp["sha256"]))):
            return str(stamp["sha256"])
        digest = sha256_file(path)
        if not self.acceptable(name, digest):
            raise self._mismatch(name, path, digest)
        if not self.manifest(name).accepted_sha256 and stamp is None:
            log.warning("model %s: no public sha256 is documented; recording %s and holding "
                        "the file to it from now on", name, digest)
        self.write_stamp(name, digest)
        return digest

    def missing_error(self, name: str) -> ModelError:
        return ModelError(
            f"model {name} is not installed (looked for {self.path(name)}): run "
            f"`livecam models fetch {name}`, or `livecam models import {name} PATH` for a copy "
            "you already have")

    def require(self, name: str) -> Path:
        """The verified path of ``name``; for stages' ``open()``. Raises :class:`ModelError`."""
        self.verify(name)
        return self.path(name)

    def status(self, name: str) -> ModelStatus:
        path = self.path(name)
        if not path.is_file():
            return ModelStatus(name, path, False, False, None, "not installed")
        try:
            digest = self.verify(name)
        except ModelError as exc:
            return ModelStatus(name, path, False, False, None, str(exc))
        return ModelStatus(name, path, True, True, digest, "verified")

    def adopt(self, name: str, src: Path, *, move: bool = False) -> Path:
        """Install ``src`` as model ``name`` after checking its hash (``models import``).

        A file that does not verify is refused and left where it is. Copies by default.
        """
        src = Path(src)
        if not src.is_file():
            raise UsageError(f"{src} is not a file")
        digest = sha256_file(src)
        manifest = self.manifest(name)
        if manifest.accepted_sha256 and digest not in manifest.accepted_sha256:
            raise ModelError(
                f"{src} has sha256 {digest}, which is not a known {name} "
                f"({', '.join(sorted(manifest.accepted_sha256))}); not imported")
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".import")
        if move:
            shutil.move(str(src), tmp)
        else:
            shutil.copyfile(src, tmp)
        os.replace(tmp, target)
        self.write_stamp(name, digest)
        return target

"""Where model files live, and the rule that an unverified file is never loaded.

:class:`ModelStore` keeps each model as ``<models_dir>/<manifest.file>``. A file is usable only
when its sha256 is one the manifest accepts, or -- for models no public source documents a hash
for -- equals the hash the user *pinned* (``<models_dir>/pins.json``). A pin is made only when
the user vouches for a copy (``livecam models import|fetch NAME --trust``) and is replaced only
when asked (``--trust --replace``); a file that fails never removes it. A file that fails is
moved to ``<models_dir>/rejected/`` (kept for inspection, never deleted) and a
:class:`ModelError` says what to do.

``<file>.sha256.json`` (the *stamp*) caches the last full check: loading skips re-hashing a file
whose size, mtime, ctime and inode are the stamp's (ctime cannot be set back by a program, so a
changed byte with its mtime restored is still caught). ``livecam models verify`` always hashes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from livecam.core.errors import ModelError, UsageError
from livecam.core.files import atomic_write, make_folder
from livecam.engines.manifest import ModelManifest

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20

ProgressFn = Callable[[int, int | None], None]  # (bytes so far, total bytes or None)


def sha256_file(path: Path, progress: ProgressFn | None = None) -> str:
    """The file's sha256 (hex); ``progress(done, total)`` after each MiB when given."""
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
            done += len(block)
            if progress is not None:
                progress(done, total)
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

    def _read_json(self, path: Path) -> dict[str, object] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    @staticmethod
    def _identity_of(st: os.stat_result) -> dict[str, int]:
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
                "inode": st.st_ino}

    def write_stamp(self, name: str, sha256: str) -> None:
        """Record that the file at :meth:`path` has ``sha256`` (and its size, times, inode)."""
        stamp = {"sha256": sha256, **self._identity_of(self.path(name).stat())}
        atomic_write(self._stamp_path(name), json.dumps(stamp).encode())

    # -- pins: the hash a user vouched for, for models with no published hash ---------------

    @property
    def _pins_path(self) -> Path:
        return self.models_dir / "pins.json"

    def pin(self, name: str) -> dict[str, object] | None:
        """The pin of ``name`` ({"sha256", "pinned", "source"}), or None."""
        entry = (self._read_json(self._pins_path) or {}).get(name)
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
            return entry
        return None

    def set_pin(self, name: str, sha256: str, source: str) -> None:
        from filelock import FileLock

        make_folder(self.models_dir, "models.dir")
        with FileLock(str(self.models_dir / ".pins.lock")):
            pins = self._read_json(self._pins_path) or {}
            old = pins.get(name)
            pins[name] = {"sha256": sha256, "pinned": time.strftime("%Y-%m-%d %H:%M:%S"),
                          "source": source}
            atomic_write(self._pins_path, json.dumps(pins, indent=2).encode())
        if isinstance(old, dict) and old.get("sha256") != sha256:
            log.warning("model %s: pin replaced: sha256 %s -> %s", name, old.get("sha256"),
                        sha256)
        else:
            log.warning("model %s: no public sha256 is documented; pinned %s (from %s): "
                        "later copies must match it", name, sha256, source)

    def expected_sha256(self, name: str) -> frozenset[str]:
        """The hashes a file must have: the published ones, else the pin (empty: neither)."""
        accepted = self.manifest(name).accepted_sha256
        if accepted:
            return accepted
        pin = self.pin(name)
        return frozenset({str(pin["sha256"])}) if pin is not None else frozenset()

    def acceptable(self, name: str, sha256: str) -> bool:
        """Whether a file with ``sha256`` may be used as model ``name``."""
        return sha256 in self.expected_sha256(name)

    def unpinned_error(self, name: str, where: str) -> UsageError:
        return UsageError(
            f"model {name} has no published sha256 and no copy was pinned, so livecam cannot "
            f"tell a good copy from a bad one: if you trust where {where} came from, run "
            f"`livecam models import {name} PATH --trust` (or `livecam models fetch {name} "
            "--trust`) to pin its sha256; later copies must then match it")

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
        moved = self.quarantine(path, sha256)
        self._stamp_path(name).unlink(missing_ok=True)
        expected = ", ".join(sorted(self.expected_sha256(name)))
        return ModelError(
            f"model {name}: {path.name} has sha256 {sha256}, expected {expected}; it was not "
            f"loaded and was moved to {moved}. Run `livecam models fetch {name}` again, or "
            f"`livecam models import {name} PATH` with a good copy")

    def verify(self, name: str, *, force: bool = False,
               progress: ProgressFn | None = None) -> str:
        """Check the installed file; returns its sha256 or raises :class:`ModelError`.

        Loading calls this without ``force``: a file whose size, mtime, ctime and inode are
        the stamp's is not re-hashed. ``force`` (``livecam models verify``) always hashes,
        calling ``progress(done, total)``. A file that does not verify is moved aside (see
        :meth:`quarantine`); a model with neither a published hash nor a pin raises
        :class:`UsageError` saying how to pin it.
        """
        path = self.path(name)
        if not path.is_file():
            raise self.missing_error(name)
        if not self.expected_sha256(name):
            raise self.unpinned_error(name, str(path))
        stamp = self._read_json(self._stamp_path(name))
        if (not force and stamp is not None and isinstance(stamp.get("sha256"), str)
                and all(stamp.get(k) == v for k, v in self._identity_of(path.stat()).items())
                and self.acceptable(name, str(stamp["sha256"]))):
            return str(stamp["sha256"])
        digest = sha256_file(path, progress)
        if not self.acceptable(name, digest):
            raise self._mismatch(name, path, digest)
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

    def status(self, name: str, *, rehash: bool = False,
               progress: ProgressFn | None = None) -> ModelStatus:
        path = self.path(name)
        if not path.is_file():
            return ModelStatus(name, path, False, False, None, "not installed")
        try:
            digest = self.verify(name, force=rehash, progress=progress)
        except (ModelError, UsageError) as exc:
            return ModelStatus(name, path, path.is_file(), False, None, str(exc))
        pinned = "" if self.manifest(name).accepted_sha256 else " (pinned sha256)"
        return ModelStatus(name, path, True, True, digest, f"verified{pinned}")

    def adopt(self, name: str, src: Path, *, move: bool = False, trust: bool = False,
              replace: bool = False, progress: ProgressFn | None = None) -> Path:
        """Install ``src`` as model ``name`` after checking its hash (``models import``).

        A model with a published hash accepts only a file with that hash. One without accepts
        a file with its pinned hash; with no pin yet, only with ``trust`` (the file's hash is
        then pinned); a file with another hash than the pin only with ``trust`` and
        ``replace``. A refused file is left where it is. Copies by default. What is hashed
        is the copy that gets installed, not ``src``: a source that changes after it was read
        (a download still writing, a shared folder) is never installed under the old hash.
        """
        src = Path(src)
        if not src.is_file():
            raise UsageError(f"{src} is not a file")
        target = self.path(name)
        in_place = src.resolve() == target.resolve()
        staged = target if in_place else target.with_name(target.name + ".import")
        if not in_place:
            make_folder(target.parent, "models.dir")
            if move:
                shutil.move(str(src), staged)
            else:
                shutil.copyfile(src, staged)
        try:
            before = self._identity_of(staged.stat())
            digest = sha256_file(staged, progress)
            if self._identity_of(staged.stat()) != before:  # in place: the user's own file
                raise ModelError(f"{src} changed while it was read; not imported: run again "
                                 "once nothing writes it")
            self._check_import(name, src, digest, trust=trust, replace=replace)
        except BaseException:
            if not in_place:
                if move:
                    shutil.move(str(staged), src)
                else:
                    staged.unlink(missing_ok=True)
            raise
        if not in_place:
            os.replace(staged, target)
        self.write_stamp(name, digest)
        return target

    def _check_import(self, name: str, src: Path, digest: str, *, trust: bool,
                      replace: bool) -> None:
        """Refuse a file with ``digest`` as model ``name`` (see :meth:`adopt`), or pin it."""
        manifest = self.manifest(name)
        pin = self.pin(name)
        if manifest.accepted_sha256 and digest not in manifest.accepted_sha256:
            raise ModelError(
                f"{src} has sha256 {digest}, which is not a known {name} "
                f"({', '.join(sorted(manifest.accepted_sha256))}); not imported")
        if not manifest.accepted_sha256:
            if pin is None and not trust:
                raise self.unpinned_error(name, str(src))
            if pin is not None and pin["sha256"] != digest and not (trust and replace):
                raise ModelError(
                    f"{src} has sha256 {digest}, but {name} is pinned to {pin['sha256']} "
                    f"(pinned {pin.get('pinned', '?')} from {pin.get('source', '?')}); not "
                    "imported. If you trust this copy instead, run again with --trust "
                    "--replace")
            if pin is None or pin["sha256"] != digest:
                self.set_pin(name, digest, str(src.resolve()))

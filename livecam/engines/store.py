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

Several processes may write one model at once (two ``models import``, an import and a
``models fetch``, a ``livecam run`` re-checking its file). Each import copies into a folder of its
own beside the model (``.<file>.*.import/``, removed when it ends), and a download is written only
by the process holding ``.<file>.part.lock`` (see :mod:`livecam.engines.fetch`). The installed
file, its stamp and its pin change only under the model's lock, ``.<file>.lock``: the pin check,
the move into place and the stamp of an import happen together, and a check hashes and stamps
the file under the same lock, taking the stamp's identity from the handle it read. The locks are
``filelock`` locks (``flock`` on Linux and macOS, a byte-range lock on Windows), which the
system drops when their process dies, so a process killed in the middle leaves no lock behind;
what it leaves (a copy in its import folder, a ``.part``, the temp file of a stamp or of
``pins.json``) is never what :meth:`ModelStore.verify` reads, and a later import, fetch or
``models verify`` removes it once no process uses it and, for a ``.part``, no fetch will resume
it (:mod:`livecam.engines.leftovers`, :meth:`ModelStore.tidy`). A wait for a lock another
process holds is said after a second and given up after ``lock_wait_s``
(``advanced.models.lock_wait_s``), with :class:`ModelBusyError` saying what to do
(:mod:`livecam.engines.store_locks`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from livecam.core.errors import ModelError, UsageError
from livecam.core.files import atomic_write, make_folder, remove_temp_files
from livecam.engines.leftovers import (
    remove_abandoned,
    remove_unused_partial,
    remove_unused_temp_files,
    staging_folder,
)
from livecam.engines.manifest import ModelManifest
from livecam.engines.model_hash import (
    CHUNK_BYTES,
    Hashed,
    ProgressFn,
    hash_file,
    identity_of,
    sha256_file,
)
from livecam.engines.store_locks import DEFAULT_LOCK_WAIT_S, ModelBusyError, holding

__all__ = ["CHUNK_BYTES", "Hashed", "ModelBusyError", "ModelStatus", "ModelStore", "ProgressFn",
           "default_models_dir", "hash_file", "sha256_file"]

log = logging.getLogger(__name__)

_PINS_LOCK = ".pins.lock"  # held while pins.json changes


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

    Cheap to construct; methods touch the disk. Any thread of any process may call them at
    any time: writes of one model take its lock (see the module's docstring), waiting at most
    ``lock_wait_s`` for another process that holds it (:class:`ModelBusyError`).
    """

    def __init__(self, models_dir: str | Path, manifests: Mapping[str, ModelManifest], *,
                 lock_wait_s: float = DEFAULT_LOCK_WAIT_S) -> None:
        self.models_dir = Path(models_dir)
        self.manifests = dict(manifests)
        self.lock_wait_s = lock_wait_s

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

    def lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        """The lock over model ``name``'s installed file, stamp and pin (``with``; waits at most
        :attr:`lock_wait_s`, then :class:`ModelBusyError`).

        Held for short steps (a pin check, a move, one hash); never take it while holding it.
        """
        make_folder(self.path(name).parent, "advanced.models.dir")
        return holding(self._lock_path(name), f"writing or checking model {name}",
                       wait_s=self.lock_wait_s)

    def _lock_path(self, name: str) -> Path:
        return self.path(name).with_name(f".{self.path(name).name}.lock")

    def download_lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        """The lock whose holder alone writes :meth:`partial_path` (held for a whole fetch;
        take it before :meth:`lock`, never while holding that; waits as :meth:`lock` does)."""
        make_folder(self.path(name).parent, "advanced.models.dir")
        return holding(self._download_lock_path(name), f"fetching model {name}",
                       wait_s=self.lock_wait_s)

    def _download_lock_path(self, name: str) -> Path:
        return self.path(name).with_name(f".{self.path(name).name}.part.lock")

    def _read_json(self, path: Path) -> dict[str, object] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def _write_stamp(self, name: str, hashed: Hashed) -> None:
        """Record that the file at :meth:`path` is the one ``hashed`` read (under the lock)."""
        if identity_of(self.path(name).stat()) != hashed.identity:
            raise ModelError(f"model {name}: {self.path(name)} changed while it was checked; "
                             "run again once nothing else writes it")
        stamp = {"sha256": hashed.sha256, **hashed.identity}
        path = self._stamp_path(name)
        remove_temp_files(path.parent, path.name)  # under the lock: killed writers' only
        atomic_write(path, json.dumps(stamp).encode())

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
        make_folder(self.models_dir, "advanced.models.dir")
        with holding(self.models_dir / _PINS_LOCK, "pinning a model's sha256",
                     wait_s=self.lock_wait_s):
            remove_temp_files(self.models_dir, self._pins_path.name)  # killed writers' only
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
        vouched = None if force else self._stamped_sha256(name)
        if vouched is not None:
            return vouched
        # under the lock, so that the file hashed is the file stamped (or moved aside): no
        # import can move another in between
        with self.lock(name):
            if not path.is_file():
                raise self.missing_error(name)
            hashed = hash_file(path, progress)
            if not hashed.steady:  # a writer in place: the hash is of no one file
                raise ModelError(f"model {name}: {path} changed while it was checked; run "
                                 "again once nothing else writes it")
            if not self.acceptable(name, hashed.sha256):
                raise self._mismatch(name, path, hashed.sha256)
            self._write_stamp(name, hashed)
        return hashed.sha256

    def _stamped_sha256(self, name: str) -> str | None:
        """The sha256 the stamp gives the installed file, when its size, mtime, ctime and inode
        are the stamp's and the hash is accepted; else None (not installed, or to be hashed)."""
        stamp = self._read_json(self._stamp_path(name))
        try:
            now = identity_of(self.path(name).stat())
        except OSError:
            return None
        if (stamp is not None and isinstance(stamp.get("sha256"), str)
                and all(stamp.get(k) == v for k, v in now.items())
                and self.acceptable(name, str(stamp["sha256"]))):
            return str(stamp["sha256"])
        return None

    def remove_stale_partial(self, name: str) -> None:
        """Remove the ``.part`` of model ``name`` when no fetch will resume it: the model is
        installed and its stamp vouches for it (a fetch then stops before the download), and
        no fetch is writing it (its download lock is free). Any thread."""
        part = self.partial_path(name)
        if part.exists() and self._stamped_sha256(name) is not None:
            remove_unused_partial(part, self._download_lock_path(name), name)

    def tidy(self) -> None:
        """Remove what killed writers left that nothing will use: abandoned import folders,
        ``.part`` of installed models, temp files of stamps and pins (see :mod:`.leftovers`)."""
        for folder in dict.fromkeys(self.path(name).parent for name in self.manifests):
            remove_abandoned(folder, wait_s=self.lock_wait_s)
        for name in self.manifests:
            self.remove_stale_partial(name)
            remove_unused_temp_files(self._stamp_path(name), self._lock_path(name))
        remove_unused_temp_files(self._pins_path, self.models_dir / _PINS_LOCK)

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
        except (ModelError, UsageError) as exc:  # ModelBusyError too: not verified, and why
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
        self.tidy()  # what killed imports, fetches and checks left

        def admit(hashed: Hashed) -> None:
            if not hashed.steady:  # in place: the user's own file, still being written
                raise ModelError(f"{src} changed while it was read; not imported: run again "
                                 "once nothing writes it")
            self._check_import(name, src, hashed.sha256, trust=trust, replace=replace)

        if src.resolve() == target.resolve():
            return self.install(name, target, hash_file(target, progress), admit=admit)
        make_folder(target.parent, "advanced.models.dir")
        # a folder of this import's own beside the model (same file system, so the move into
        # place is a rename), which no other import writes; the copy gets the usual mode
        with staging_folder(target.parent, target.name, wait_s=self.lock_wait_s) as staging:
            staged = staging / target.name
            if move:
                shutil.move(str(src), staged)
            else:
                shutil.copyfile(src, staged)
            try:
                self.install(name, staged, hash_file(staged, progress), admit=admit)
            except BaseException:
                if move and staged.exists():
                    shutil.move(str(staged), src)
                raise
        self.remove_stale_partial(name)
        return target

    def install(self, name: str, staged: Path, hashed: Hashed, *,
                admit: Callable[[Hashed], None]) -> Path:
        """Move ``staged`` into place as model ``name`` and stamp it, under :meth:`lock`.

        ``hashed`` is :func:`hash_file` of ``staged``, a file no other process writes (or
        :meth:`path` itself, to vouch for it in place). ``admit(hashed)`` runs first, under
        the lock, and raises to refuse the file (it checks and sets the pin), so the pin, the
        file and its stamp change together. Returns :meth:`path`.
        """
        target = self.path(name)
        with self.lock(name):
            admit(hashed)
            if staged != target:
                os.replace(staged, target)
            now = identity_of(target.stat())
            # a rename keeps the file (size, mtime, inode) but may move its ctime
            kept = ("size", "mtime_ns", "inode") if staged != target else tuple(now)
            if any(now[k] != hashed.identity[k] for k in kept):
                raise ModelError(f"model {name}: {target} changed while it was installed; "
                                 "run again once nothing else writes it")
            self._write_stamp(name, Hashed(hashed.sha256, now, True))
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

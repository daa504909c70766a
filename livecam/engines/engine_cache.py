"""The on-disk cache of built engines, and the keys that decide what may be loaded.

Two kinds of entry live here: TensorRT engines (:class:`EngineKey`: model bytes, GPU, TensorRT
version, precision, optimisation profiles) and compiled torch generators (:class:`CompiledKey`:
model bytes, device, torch/triton versions, precision, batch, layout, autotuning and the
executor's own source). An entry is a ``<model>-<digest16><suffix>`` file plus a ``.json``
sidecar with the key's kind, the full key and the file's own sha256. :meth:`EngineCache.load`
and :meth:`EngineCache.load_path` return an entry only when the sidecar's key equals the asked
key field for field and the file hashes to what the sidecar recorded; anything else (another
GPU, an older TensorRT or torch, a changed executor, a renamed or truncated file) is refused and
logged, never loaded.

Writes are atomic (temporary file + ``os.replace``) and serialised with a file lock, so two
processes building at once cannot leave a half-written engine or lose timing-cache entries. A
process killed while it writes leaves its temp file (``.<name>.*.tmp``, as large as an engine):
the next write removes those under the lock, and a start (:meth:`EngineCache.tidy`: ``livecam
engines``, an engine opening its entry) when the lock is free.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol

from livecam.core.errors import LivecamError
from livecam.core.files import atomic_write, make_folder, remove_temp_files, temp_files
from livecam.engines.store_locks import held_if_free, holding

log = logging.getLogger(__name__)

KEY_VERSION = 1
COMPILED_KEY_VERSION = 2  # 2: Inductor cache entries (1 was AOTInductor packages)


@dataclass(frozen=True)
class Profile:
    """One optimisation profile: min/opt/max shape of each dynamic input, by input name."""

    shapes: tuple[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]

    @classmethod
    def for_batch(cls, inputs: dict[str, tuple[int, ...]], lo: int, opt: int, hi: int) -> Profile:
        """A profile over batch sizes lo..hi for inputs whose non-batch dims are given."""
        if not 1 <= lo <= opt <= hi:
            raise ValueError(f"profile batches must satisfy 1 <= min <= opt <= max, got "
                             f"{lo}, {opt}, {hi}")
        return cls(tuple((name, (lo, *rest), (opt, *rest), (hi, *rest))
                         for name, rest in sorted(inputs.items())))

    def to_list(self) -> list[Any]:
        return [[n, list(a), list(b), list(c)] for n, a, b, c in self.shapes]


class CacheKey(Protocol):
    """What :class:`EngineCache` needs of a key."""

    kind: ClassVar[str]
    suffix: ClassVar[str]

    def to_dict(self) -> dict[str, Any]: ...

    def digest(self) -> str: ...

    def describe(self) -> str: ...


def _digest(data: dict[str, Any]) -> str:
    """sha256 of the canonical JSON form: equal keys give equal digests."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def differences(mine: CacheKey, theirs: CacheKey) -> list[str]:
    """Names of the fields that differ (empty when equal; every field for another kind)."""
    a, b = mine.to_dict(), theirs.to_dict()
    if mine.kind != theirs.kind:
        return ["kind"]
    return sorted(k for k in a if a[k] != b.get(k))


@dataclass(frozen=True)
class EngineKey:
    """Everything a serialized TensorRT engine depends on."""

    kind: ClassVar[str] = "tensorrt"
    suffix: ClassVar[str] = ".engine"

    model_sha256: str
    gpu_name: str
    compute_capability: str
    tensorrt_version: str
    precision: str
    profiles: tuple[Profile, ...] = ()
    fp32_layers: tuple[str, ...] = ()
    key_version: int = field(default=KEY_VERSION)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["profiles"] = [p.to_list() for p in self.profiles]
        data["fp32_layers"] = list(self.fp32_layers)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineKey:
        profiles = tuple(
            Profile(tuple((n, tuple(a), tuple(b), tuple(c)) for n, a, b, c in p))
            for p in data.get("profiles", [])
        )
        return cls(
            model_sha256=str(data["model_sha256"]), gpu_name=str(data["gpu_name"]),
            compute_capability=str(data["compute_capability"]),
            tensorrt_version=str(data["tensorrt_version"]), precision=str(data["precision"]),
            profiles=profiles, fp32_layers=tuple(data.get("fp32_layers", ())),
            key_version=int(data.get("key_version", 0)),
        )

    def digest(self) -> str:
        return _digest(self.to_dict())

    def differences(self, other: CacheKey) -> list[str]:
        return differences(self, other)

    def describe(self) -> str:
        return (f"TensorRT {self.tensorrt_version} {self.precision} {self.gpu_name} "
                f"sm{self.compute_capability}")


@dataclass(frozen=True)
class CompiledKey:
    """Everything a compiled torch generator (Inductor's code for one flattened graph and batch)
    depends on.

    ``device`` names the hardware the code was generated for (GPU name and compute capability,
    or the CPU architecture and the vector ISA torch uses); ``executor_sha256`` hashes the
    ONNX executor's source, so fixing an op invalidates every graph traced through it. The
    entry itself is small (the flattened graph's digest); the compiled code lives in the
    cache's ``inductor`` folder.
    """

    kind: ClassVar[str] = "torch-compiled"
    suffix: ClassVar[str] = ".compiled"

    model_sha256: str
    device: str
    torch_version: str
    triton_version: str
    precision: str
    batch: int
    channels_last: bool
    max_autotune: bool
    executor_sha256: str
    key_version: int = field(default=COMPILED_KEY_VERSION)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompiledKey:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def digest(self) -> str:
        return _digest(self.to_dict())

    def differences(self, other: CacheKey) -> list[str]:
        return differences(self, other)

    def describe(self) -> str:
        tuned = ", max-autotune" if self.max_autotune else ""
        return (f"compiled torch {self.torch_version} {self.precision} batch {self.batch} "
                f"{self.device}{tuned}")


KEY_KINDS: dict[str, Any] = {EngineKey.kind: EngineKey, CompiledKey.kind: CompiledKey}


def key_from_sidecar(meta: dict[str, Any]) -> CacheKey:
    """The key a sidecar records (sidecars written before kinds existed are TensorRT's)."""
    cls = KEY_KINDS.get(str(meta.get("kind", EngineKey.kind)))
    if cls is None:
        raise ValueError(f"unknown engine kind {meta.get('kind')!r}")
    key: CacheKey = cls.from_dict(meta["key"])
    return key


@dataclass(frozen=True)
class CacheEntry:
    engine_path: Path
    key: CacheKey
    size_bytes: int
    model_name: str


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class EngineCacheBusyError(LivecamError, RuntimeError):
    """Another process held the engine cache's lock for longer than a writer waits."""


class EngineCache:
    """Serialized engines under ``root``. Any thread may call; writers take a file lock,
    waiting for another process's write at most ``lock_wait_s`` (said after a second; then
    :class:`EngineCacheBusyError`): writes take moments, so a long wait is a stuck process."""

    def __init__(self, root: str | Path, *, lock_wait_s: float = 600.0) -> None:
        self.root = Path(root)
        self.lock_wait_s = lock_wait_s

    @property
    def timing_cache_path(self) -> Path:
        return self.root / "timing.cache"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """An inter-process lock (``with cache.lock(): ...``) over writes to this cache; every
        write holds it, so the temp files found under it are killed writers': removed."""
        make_folder(self.root, "advanced.engine.cache_dir")
        with holding(self.root / ".lock", f"writing the engine cache {self.root}",
                     wait_s=self.lock_wait_s, knob=None, error=EngineCacheBusyError):
            remove_temp_files(self.root)
            yield

    def tidy(self) -> None:
        """Remove the temp files that writers killed mid-write left, if no process holds the
        lock now (one that does is writing: the next start or write removes them). Never
        waits; for a start. Any thread."""
        if temp_files(self.root):  # first: no lock file made where none is needed
            with held_if_free(self.root / ".lock") as free:
                if free:
                    remove_temp_files(self.root)

    def engine_path(self, model_name: str, key: CacheKey) -> Path:
        return self.root / f"{model_name}-{key.digest()[:16]}{key.suffix}"

    def load(self, model_name: str, key: CacheKey) -> bytes | None:
        """The engine built for exactly ``key``, or None (missing, other key, corrupt)."""
        path = self.load_path(model_name, key)
        return None if path is None else path.read_bytes()

    def load_path(self, model_name: str, key: CacheKey) -> Path | None:
        """The path of the entry built for exactly ``key`` after checking its sidecar key and
        its bytes' sha256, or None (missing, other key, corrupt: logged)."""
        path = self.engine_path(model_name, key)
        meta_path = path.with_suffix(".json")
        if not path.is_file() or not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            stored = key_from_sidecar(meta)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("engine cache entry %s has an unreadable key (%s); not loading it",
                        path.name, exc)
            return None
        if stored != key:
            log.warning("engine cache entry %s was built for another %s; not loading it",
                        path.name, ", ".join(differences(key, stored)))
            return None
        if _sha256_file(path) != meta.get("engine_sha256"):
            log.warning("engine cache entry %s does not match its recorded sha256 (truncated or "
                        "modified); not loading it", path.name)
            return None
        return path

    def save(self, model_name: str, key: CacheKey, data: bytes) -> Path:
        """Store an engine for ``key`` atomically; returns its path."""
        path = self.engine_path(model_name, key)
        with self.lock():
            atomic_write(path, data)
            self._write_sidecar(path, model_name, key, hashlib.sha256(data).hexdigest())
        return path

    def save_file(self, model_name: str, key: CacheKey, source: Path) -> Path:
        """Move the built file ``source`` (on the cache's file system, e.g. from
        :meth:`scratch_dir`) into the entry for ``key`` atomically; returns its path."""
        path = self.engine_path(model_name, key)
        digest = _sha256_file(source)
        with self.lock():
            os.replace(source, path)
            self._write_sidecar(path, model_name, key, digest)
        return path

    def scratch_dir(self) -> Path:
        """A new empty directory inside the cache for a build's files (same file system, so
        :meth:`save_file` moves atomically); the caller removes it."""
        make_folder(self.root, "advanced.engine.cache_dir")
        return Path(tempfile.mkdtemp(prefix=".build-", dir=self.root))

    def _write_sidecar(self, path: Path, model_name: str, key: CacheKey, digest: str) -> None:
        meta = {"model_name": model_name, "kind": key.kind, "key": key.to_dict(),
                "engine_sha256": digest}
        atomic_write(path.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True).encode())

    def entries(self) -> list[CacheEntry]:
        """Every entry with a readable sidecar, sorted by file name."""
        out = []
        for meta_path in sorted(self.root.glob("*.json")):
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                key = key_from_sidecar(meta)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            engine = meta_path.with_suffix(key.suffix)
            if engine.is_file():
                out.append(CacheEntry(engine, key, engine.stat().st_size,
                                      str(meta.get("model_name", ""))))
        return out

    def clear(self, model_name: str | None = None) -> int:
        """Delete entries (of one model, or all) and, for all, the timing cache; returns count."""
        removed = 0
        with self.lock():
            for entry in self.entries():
                if model_name is None or entry.model_name == model_name:
                    entry.engine_path.unlink(missing_ok=True)
                    entry.engine_path.with_suffix(".json").unlink(missing_ok=True)
                    removed += 1
            if model_name is None:
                self.timing_cache_path.unlink(missing_ok=True)
                shutil.rmtree(self.root / "inductor", ignore_errors=True)  # compiled torch code
        return removed

    def merge_timing_cache(self, merge: Callable[[bytes | None], bytes]) -> None:
        """Under the lock: read the timing cache, let ``merge`` combine it, write it back.

        ``merge`` gets the current bytes (None when there is none yet) and returns the bytes to
        store; reading and writing under one lock means concurrent builds add to each other's
        entries instead of overwriting them.
        """
        with self.lock():
            path = self.timing_cache_path
            current = path.read_bytes() if path.is_file() else None
            atomic_write(path, merge(current))

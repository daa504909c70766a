"""The on-disk cache of built TensorRT engines, and the key that decides what may be loaded.

An engine is only valid for the exact model bytes, GPU, TensorRT version, precision and
optimisation profiles it was built for. :class:`EngineKey` holds all of them; an entry is a
``<model>-<digest16>.engine`` file plus a ``.json`` sidecar with the full key and the engine
file's own sha256. :meth:`EngineCache.load` returns bytes only when the sidecar's key equals the
asked key field for field and the engine bytes hash to what the sidecar recorded; anything else
(another GPU, an older TensorRT, a renamed or truncated file) is refused and logged, never loaded.

Writes are atomic (temporary file + ``os.replace``) and serialised with a file lock, so two
processes building at once cannot leave a half-written engine or lose timing-cache entries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KEY_VERSION = 1


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


@dataclass(frozen=True)
class EngineKey:
    """Everything a serialized engine depends on."""

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
        """sha256 of the canonical JSON form: equal keys give equal digests."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def differences(self, other: EngineKey) -> list[str]:
        """Names of the fields that differ (empty when equal)."""
        mine, theirs = self.to_dict(), other.to_dict()
        return sorted(k for k in mine if mine[k] != theirs.get(k))


@dataclass(frozen=True)
class CacheEntry:
    engine_path: Path
    key: EngineKey
    size_bytes: int
    model_name: str


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class EngineCache:
    """Serialized engines under ``root``. Any thread may call; writers take a file lock."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def timing_cache_path(self) -> Path:
        return self.root / "timing.cache"

    def lock(self, timeout_s: float = 600.0) -> Any:
        """An inter-process lock (``with cache.lock(): ...``) over writes to this cache."""
        from filelock import FileLock

        self.root.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.root / ".lock"), timeout=timeout_s)

    def engine_path(self, model_name: str, key: EngineKey) -> Path:
        return self.root / f"{model_name}-{key.digest()[:16]}.engine"

    def load(self, model_name: str, key: EngineKey) -> bytes | None:
        """The engine built for exactly ``key``, or None (missing, other key, corrupt)."""
        path = self.engine_path(model_name, key)
        meta_path = path.with_suffix(".json")
        if not path.is_file() or not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            stored = EngineKey.from_dict(meta["key"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("engine cache entry %s has an unreadable key (%s); not loading it",
                        path.name, exc)
            return None
        if stored != key:
            log.warning("engine cache entry %s was built for another %s; not loading it",
                        path.name, ", ".join(key.differences(stored)))
            return None
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != meta.get("engine_sha256"):
            log.warning("engine cache entry %s does not match its recorded sha256 (truncated or "
                        "modified); not loading it", path.name)
            return None
        return data

    def save(self, model_name: str, key: EngineKey, data: bytes) -> Path:
        """Store an engine for ``key`` atomically; returns its path."""
        path = self.engine_path(model_name, key)
        meta = {"model_name": model_name, "key": key.to_dict(),
                "engine_sha256": hashlib.sha256(data).hexdigest()}
        with self.lock():
            atomic_write(path, data)
            atomic_write(path.with_suffix(".json"),
                         json.dumps(meta, indent=2, sort_keys=True).encode())
        return path

    def entries(self) -> list[CacheEntry]:
        """Every entry with a readable sidecar, sorted by file name."""
        out = []
        for meta_path in sorted(self.root.glob("*.json")):
            engine = meta_path.with_suffix(".engine")
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                key = EngineKey.from_dict(meta["key"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
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

"""The identity library: named source faces stored in the user's data dir.

Layout under the library root (``identity.library_dir``, default the platformdirs user data
dir)::

    identities/<name>.json       name, photos (sha256, original path, warnings), created
    identities/<name>.jpg        thumbnail (the first photo's face)
    photos/<sha256>/texture.png  face crop the classic swap warps
    photos/<sha256>/mesh.npz     its landmarks (468x2 px, 468 depth), format version
    photos/<sha256>/thumb.jpg

Everything derived from a photo is keyed by the photo file's sha256, so two identities that use
the same photo share it and re-adding a photo costs nothing. Writes are atomic (temp file +
rename); a failed ``add`` leaves the library as it was. Any thread may read; writes come from
the CLI (one process at a time is assumed; the last writer of an identity wins).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from livecam.config.identity import IdentityConfig
from livecam.core.errors import IdentityError
from livecam.identity.model import Identity, IdentityPhoto
from livecam.identity.photo import PreparedPhoto, prepare_photo, read_photo

log = logging.getLogger(__name__)

MESH_FORMAT_VERSION = 1
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}$")


def default_library_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("livecam", appauthor=False)) / "identities"


def validate_name(name: str) -> str:
    """``name`` if it is a safe identity name, else :class:`IdentityError` saying why."""
    if not isinstance(name, str) or not name.strip():
        raise IdentityError("identity name is empty: give a name like `alice`")
    if "/" in name or "\\" in name or "\x00" in name:
        raise IdentityError(f"identity name {name!r} contains a path separator: use letters, "
                            "digits, spaces, '.', '_' or '-'")
    if ".." in name:
        raise IdentityError(f"identity name {name!r} contains '..': use letters, digits, "
                            "spaces, '.', '_' or '-'")
    if not _NAME_RE.match(name) or name != name.strip():
        raise IdentityError(f"identity name {name!r} is not allowed: 1-64 characters, starting "
                            "with a letter or digit, then letters, digits, spaces, '.', '_' "
                            "or '-'")
    return name


@dataclass(frozen=True)
class IdentityEntry:
    """What the library knows about one identity without loading its textures."""

    name: str
    photos: tuple[dict[str, Any], ...]
    created: float
    thumb_path: Path


@dataclass(frozen=True)
class AddResult:
    entry: IdentityEntry
    added_sha256: tuple[str, ...]
    skipped_sha256: tuple[str, ...]  # photos already in this identity
    warnings: tuple[str, ...]  # "PHOTO: problem" lines (quality warnings, then notes)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _encode(image: np.ndarray, ext: str) -> bytes:
    ok, buf = cv2.imencode(ext, image)
    if not ok:
        raise IdentityError(f"could not encode a {ext} image for the library")
    return buf.tobytes()


class IdentityLibrary:
    """The library at ``root`` (created on first write). Construction touches no files."""

    def __init__(self, root: str | Path, config: IdentityConfig | None = None) -> None:
        self.root = Path(root)
        self.config = config or IdentityConfig()

    @classmethod
    def from_config(cls, config: IdentityConfig) -> IdentityLibrary:
        root = Path(config.library_dir).expanduser() if config.library_dir else None
        return cls(root or default_library_dir(), config)

    def _meta_path(self, name: str) -> Path:
        return self.root / "identities" / f"{validate_name(name)}.json"

    def _photo_dir(self, sha256: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise IdentityError(f"library entry names a bad photo key {sha256!r}: remove and "
                                "re-add the identity")
        return self.root / "photos" / sha256

    def names(self) -> list[str]:
        folder = self.root / "identities"
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if _NAME_RE.match(p.stem))

    def get(self, name: str) -> IdentityEntry:
        path = self._meta_path(name)
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            known = ", ".join(self.names()) or "none yet"
            raise IdentityError(f"no identity named {name!r} (known: {known}); add one with "
                                f"`livecam identity add {name} PHOTO`") from None
        except (OSError, ValueError) as exc:
            raise IdentityError(f"identity {name!r} is damaged ({exc}): remove it with "
                                f"`livecam identity remove {name}` and add it again") from None
        return IdentityEntry(name=name, photos=tuple(meta.get("photos", ())),
                             created=float(meta.get("created", 0.0)),
                             thumb_path=path.with_suffix(".jpg"))

    def entries(self) -> list[IdentityEntry]:
        return [self.get(n) for n in self.names()]

    def prepare(self, photos: Sequence[str | Path]) -> list[tuple[Path, PreparedPhoto]]:
        """Read and check every photo; raise on the first unusable one (nothing is written)."""
        if not photos:
            raise IdentityError("no photo given: `livecam identity add NAME PHOTO [PHOTO...]`")
        prepared = []
        for photo in photos:
            path = Path(photo)
            image, data = read_photo(path, max_megapixels=self.config.max_photo_megapixels)
            prepared.append((path, prepare_photo(image, data, self.config, label=str(path))))
        return prepared

    def add(self, name: str, photos: Sequence[str | Path], *, force: bool = False) -> AddResult:
        """Add photos to identity ``name`` (created if new). All or nothing.

        Photos with quality warnings are refused unless ``force``; the error lists them.
        """
        validate_name(name)
        prepared = self.prepare(photos)
        warnings = tuple(f"{path}: {w}" for path, p in prepared for w in p.warnings)
        if warnings and not force:
            raise IdentityError("photo problems (nothing was added; pass --force to add "
                                "anyway): " + "; ".join(warnings))
        warnings += tuple(f"{path}: {n}" for path, p in prepared for n in p.notes)
        try:
            existing = list(self.get(name).photos)
            created = self.get(name).created
        except IdentityError:
            if self._meta_path(name).exists():
                raise
            existing, created = [], time.time()
        have = {p["sha256"] for p in existing}
        added, skipped = [], []
        for path, prep in prepared:
            if prep.sha256 in have:
                skipped.append(prep.sha256)
                continue
            self._store_photo(prep)
            existing.append({"sha256": prep.sha256, "source": str(path.resolve()),
                             "added": time.time(), "face_width_px": round(prep.face_width_px, 1),
                             "warnings": list(prep.warnings)})
            have.add(prep.sha256)
            added.append(prep.sha256)
        meta = {"name": name, "created": created, "photos": existing}
        first = self._photo_dir(existing[0]["sha256"]) / "thumb.jpg"
        _atomic_write(self._meta_path(name).with_suffix(".jpg"), first.read_bytes())
        _atomic_write(self._meta_path(name), json.dumps(meta, indent=2).encode())
        log.info("identity %s: %d photo(s) added, %d already there", name, len(added),
                 len(skipped))
        return AddResult(self.get(name), tuple(added), tuple(skipped), warnings)

    def _store_photo(self, prep: PreparedPhoto) -> None:
        folder = self._photo_dir(prep.sha256)
        _atomic_write(folder / "texture.png", _encode(prep.texture_bgr, ".png"))
        _atomic_write(folder / "thumb.jpg", _encode(prep.thumb_bgr, ".jpg"))
        with tempfile.TemporaryFile() as fh:
            np.savez(fh, version=np.int32(MESH_FORMAT_VERSION), landmarks_xy=prep.landmarks_xy,
                     landmarks_z=prep.landmarks_z)
            fh.seek(0)
            _atomic_write(folder / "mesh.npz", fh.read())

    def remove(self, name: str) -> None:
        """Delete identity ``name``; photos no other identity uses are deleted too."""
        entry = self.get(name)
        self._meta_path(name).unlink()
        entry.thumb_path.unlink(missing_ok=True)
        used = {p["sha256"] for other in self.entries() for p in other.photos}
        for photo in entry.photos:
            sha = photo["sha256"]
            if sha in used:
                continue
            folder = self._photo_dir(sha)
            for child in folder.glob("*"):
                child.unlink()
            if folder.exists():
                folder.rmdir()

    def load(self, name: str) -> Identity:
        """The identity's photos (textures + landmarks) from the cache; any thread."""
        entry = self.get(name)
        photos = []
        for photo in entry.photos:
            folder = self._photo_dir(photo["sha256"])
            read = cv2.imread(str(folder / "texture.png"), cv2.IMREAD_COLOR)
            texture = None if read is None else np.asarray(read, np.uint8)
            try:
                with np.load(folder / "mesh.npz") as npz:
                    version = int(npz["version"])
                    xy = npz["landmarks_xy"].astype(np.float32)
                    z = npz["landmarks_z"].astype(np.float32)
            except (OSError, KeyError, ValueError):
                version, xy, z = -1, None, None
            if texture is None or xy is None or z is None or version != MESH_FORMAT_VERSION:
                raise IdentityError(f"identity {name!r}: cached files for photo "
                                    f"{photo['sha256'][:12]} are missing or stale; re-add it "
                                    f"with `livecam identity add {name} PHOTO`")
            photos.append(IdentityPhoto(sha256=photo["sha256"], texture_bgr=texture,
                                        landmarks_xy=xy, landmarks_z=z,
                                        warnings=tuple(photo.get("warnings", ()))))
        if not photos:
            raise IdentityError(f"identity {name!r} has no photos: add one with "
                                f"`livecam identity add {name} PHOTO`")
        return Identity(name=name, photos=tuple(photos))

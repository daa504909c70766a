"""The identity library: named source faces stored in the user's data dir.

Layout under the library root (``identity.library_dir``, default ``library`` in the
platformdirs user data dir: :func:`default_library_dir`)::

    identities/<name>.json       name, photos (sha256, original path, warnings), created
    identities/<name>.jpg        thumbnail (the first photo's face)
    photos/<sha256>/texture.png  face crop the classic swap warps
    photos/<sha256>/mesh.npz     its landmarks (468x2 px, 468 depth), format version
    photos/<sha256>/thumb.jpg

Everything derived from a photo is keyed by the photo file's sha256, so two identities that use
the same photo share it and re-adding a photo costs nothing. Every write (``add``, ``remove``)
holds the library's file lock (``.lock`` in the root, :mod:`filelock`), so concurrent ``livecam
identity add`` processes keep every photo; each file is written atomically (see
:mod:`livecam.identity.record`), so a writer killed at any moment leaves a library that lists
and loads. Photo folders no identity uses (a killed add, a removed identity) and stray temp
files are deleted by the next write, and only those livecam made: see
:mod:`livecam.identity.ownership` (a folder holding files livecam did not write is
refused). A damaged record is listed as damaged and can be removed.
Any thread or process may read without the lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from livecam.config.identity import IdentityConfig
from livecam.core.errors import IdentityError
from livecam.core.files import atomic_write, make_folder, remove_temp_files
from livecam.identity.model import Identity, IdentityPhoto
from livecam.identity.ownership import (
    RECORD_NAME,
    check_ownable,
    is_real_folder,
    read_owned,
    remove_photo_folder,
    write_owned,
)
from livecam.identity.photo import PreparedPhoto, prepare_photo, read_photo
from livecam.identity.record import (
    SHA256_RE,
    IdentityEntry,
    read_record,
    record_bytes,
)
from livecam.identity.same_person import check_same_person

log = logging.getLogger(__name__)

MESH_FORMAT_VERSION = 1
#: How long a write waits for another process's write to finish, s.
LOCK_TIMEOUT_S = 120.0
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}$")


def default_library_dir() -> Path:
    """The library's folder when ``identity.library_dir`` is empty: ``library`` in the user
    data dir (records in ``library/identities/``). Before, it was ``identities`` there, so
    records lay in ``identities/identities/``; a library an earlier livecam
    made there is used where it is, untouched, as long as no new one exists."""
    import platformdirs

    data = Path(platformdirs.user_data_dir("livecam", appauthor=False))
    new, old = data / "library", data / "identities"
    if not os.path.lexists(new) and (is_real_folder(old / "identities")
                                     or os.path.lexists(old / RECORD_NAME)):
        return old
    return new


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
class AddResult:
    entry: IdentityEntry
    added_sha256: tuple[str, ...]
    skipped_sha256: tuple[str, ...]  # photos already in this identity
    warnings: tuple[str, ...]  # "PHOTO: problem" lines (quality warnings, then notes)


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
        self._check_root()
        return self.root / "identities" / f"{validate_name(name)}.json"

    def _check_root(self) -> None:
        """Refuse a library path that is not a folder (a file set as identity.library_dir)."""
        if self.root.exists() and not self.root.is_dir():
            raise IdentityError(f"the identity library {self.root} is a file, not a folder: "
                                "set identity.library_dir to a folder")

    def _photo_dir(self, sha256: str) -> Path:
        if not SHA256_RE.fullmatch(sha256):
            raise IdentityError(f"library entry names a bad photo key {sha256!r}: remove and "
                                "re-add the identity")
        return self.root / "photos" / sha256

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the library's write lock (between processes, and threads of one process)."""
        from filelock import FileLock, Timeout

        self._check_root()
        check_ownable(self.root)  # before the lock file: nothing is written in a user's folder
        make_folder(self.root, "identity.library_dir")
        lock = FileLock(str(self.root / ".lock"))
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise IdentityError(f"the identity library {self.root} is busy: another `livecam "
                                f"identity` command has held its lock for {LOCK_TIMEOUT_S:g} "
                                "s; try again when it ends") from None
        try:
            check_ownable(self.root)  # again, under the lock: what another writer left
            if not (self.root / RECORD_NAME).exists():
                write_owned(self.root, read_owned(self.root))  # new, or from before the record
            yield
        finally:
            lock.release()

    def names(self) -> list[str]:
        """Every identity with a record, damaged ones included (see :meth:`scan`)."""
        self._check_root()
        folder = self.root / "identities"
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if _NAME_RE.match(p.stem))

    def get(self, name: str) -> IdentityEntry:
        path = self._meta_path(name)
        try:
            return read_record(path, name)
        except FileNotFoundError:
            known = ", ".join(self.names()) or "none yet"
            raise IdentityError(f"no identity named {name!r} (known: {known}); add one with "
                                f"`livecam identity add {name} PHOTO`") from None

    def scan(self) -> tuple[list[IdentityEntry], dict[str, IdentityError]]:
        """(the readable identities, the damaged ones with why): a damaged record never hides
        the others."""
        entries, damaged = [], {}
        for name in self.names():
            try:
                entries.append(self.get(name))
            except IdentityError as exc:
                damaged[name] = exc
        return entries, damaged

    def entries(self) -> list[IdentityEntry]:
        """The readable identities (damaged ones are skipped: see :meth:`scan`)."""
        return self.scan()[0]

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

        Photos with quality warnings are refused unless ``force``; the error lists them. The
        photos are analysed first, then the library is written under its lock, so concurrent
        adds (other processes included) each keep their photos.
        """
        validate_name(name)
        prepared = self.prepare(photos)
        check_same_person(prepared, self._kept_photos(name))
        warnings = tuple(f"{path}: {w}" for path, p in prepared for w in p.warnings)
        if warnings and not force:
            raise IdentityError("photo problems (nothing was added; pass --force to add "
                                "anyway): " + "; ".join(warnings))
        warnings += tuple(f"{path}: {n}" for path, p in prepared for n in p.notes)
        with self._writing():
            try:
                entry = self.get(name)
                existing, created = list(entry.photos), entry.created
            except IdentityError:
                if self._meta_path(name).exists():
                    raise  # damaged: its message says to remove it first
                existing, created = [], time.time()
            have = {p["sha256"] for p in existing}
            added, skipped = [], []
            owned = read_owned(self.root)
            new = {p.sha256 for _, p in prepared} - owned
            if new:  # listed before they are made: a killed add leaves nothing unlisted
                write_owned(self.root, owned | new)
            try:
                for path, prep in prepared:
                    if prep.sha256 in have:
                        skipped.append(prep.sha256)
                        continue
                    self._store_photo(prep)
                    existing.append({"sha256": prep.sha256, "source": str(path.resolve()),
                                     "added": time.time(),
                                     "face_width_px": round(prep.face_width_px, 1),
                                     "warnings": list(prep.warnings)})
                    have.add(prep.sha256)
                    added.append(prep.sha256)
                first = self._photo_dir(existing[0]["sha256"]) / "thumb.jpg"
                atomic_write(self._meta_path(name).with_suffix(".jpg"), first.read_bytes())
                atomic_write(self._meta_path(name), record_bytes(name, created, existing))
            finally:
                self._collect_garbage()  # photos of a failed add, temp files
            result = AddResult(self.get(name), tuple(added), tuple(skipped), warnings)
        log.info("identity %s: %d photo(s) added, %d already there", name, len(added),
                 len(skipped))
        return result

    def _kept_photos(self, name: str) -> tuple[IdentityPhoto, ...]:
        """Identity ``name``'s photos already in the library; none when it is new or
        damaged (a damaged one refuses the add under the lock)."""
        try:
            return self.load(name).photos
        except IdentityError:
            return ()

    def _store_photo(self, prep: PreparedPhoto) -> None:
        folder = self._photo_dir(prep.sha256)
        if os.path.lexists(folder) and not is_real_folder(folder):  # never write through a link
            raise IdentityError(f"the identity library's {folder} is not a folder livecam "
                                "made: move it away and add the photo again")
        atomic_write(folder / "texture.png", _encode(prep.texture_bgr, ".png"))
        atomic_write(folder / "thumb.jpg", _encode(prep.thumb_bgr, ".jpg"))
        with tempfile.TemporaryFile() as fh:
            np.savez(fh, version=np.int32(MESH_FORMAT_VERSION), landmarks_xy=prep.landmarks_xy,
                     landmarks_z=prep.landmarks_z)
            fh.seek(0)
            atomic_write(folder / "mesh.npz", fh.read())

    def remove(self, name: str) -> None:
        """Delete identity ``name``, damaged or not; photos no other identity uses go too."""
        path = self._meta_path(name)
        with self._writing():
            if not path.exists():
                self.get(name)  # raises "no identity named ..."
            try:
                own = {p["sha256"] for p in self.get(name).photos}
            except IdentityError:
                own = set()  # damaged: which photos it had is unknown; the sweep decides
            path.unlink()
            path.with_suffix(".jpg").unlink(missing_ok=True)
            self._collect_garbage(also=own)

    def _collect_garbage(self, also: AbstractSet[str] = frozenset()) -> None:
        """Delete the photo folders livecam made that no readable identity uses (only
        livecam's files in them), and stray temp files. Holds the
        write lock (no add is between storing photos and writing its record). While a record
        is damaged, only the folders in ``also`` are candidates: the damaged record may name
        the others, and its owner may still repair it by hand."""
        entries, damaged = self.scan()
        used = {p["sha256"] for e in entries for p in e.photos}
        owned = read_owned(self.root)
        photos = self.root / "photos"
        gone = set()
        for sha256 in sorted(owned):
            if sha256 in used or (damaged and sha256 not in also):
                continue
            if remove_photo_folder(photos / sha256):
                gone.add(sha256)
        if gone:
            write_owned(self.root, owned - gone)
        remove_temp_files(self.root, RECORD_NAME)  # under the lock: killed writers'
        for folder in [self.root / "identities",
                       *(photos / s for s in sorted(owned - gone) if is_real_folder(photos / s))]:
            remove_temp_files(folder)

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

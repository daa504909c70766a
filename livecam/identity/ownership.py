"""What in the identity library livecam made itself: the ``.livecam-library`` record.

livecam deletes only what it created. The library root holds a small JSON record,
``.livecam-library``, that marks the folder as a livecam library and lists every photo folder
(``photos/<sha256>``) livecam made there; a clean-up removes only folders on that list, and in
them only the files livecam writes (then the folder, if that left it empty: a file someone
else put there stays, and so does its folder).

A folder set as ``identity.library_dir`` that holds anything livecam did not write (say
``~/Pictures``) is refused with one line before anything is written to it, and so is a library
whose ``photos`` or ``identities`` is a symlink or not a folder: livecam never follows a link
out of its library. A library made before the record existed, holding only livecam's own
layout, is adopted (the record is written for it). The record is written under the library's
write lock, atomically; a photo folder is listed *before* it is made, so a writer killed at
any moment leaves nothing of its own unlisted.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from livecam.core.errors import IdentityError
from livecam.core.files import TEMP_SUFFIX, atomic_write, remove_temp_files
from livecam.identity.record import SHA256_RE

log = logging.getLogger(__name__)

RECORD_NAME = ".livecam-library"
#: What livecam writes in the library root (``.lock`` is the write lock's file).
ROOT_ENTRIES = frozenset({RECORD_NAME, ".lock", "identities", "photos"})
#: What livecam writes in a photo folder.
PHOTO_FILES = frozenset({"texture.png", "mesh.npz", "thumb.jpg"})
_RECORD_FORMAT = 1


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def _refuse(root: Path, what: str) -> IdentityError:
    return IdentityError(f"identity.library_dir {root} {what}: livecam only writes in a folder "
                         "of its own; set identity.library_dir to a new or empty folder")


def is_real_folder(path: Path) -> bool:
    """True for a folder that is not a symlink (False for anything else, or nothing there)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _check_subfolders(root: Path) -> None:
    for sub in ("identities", "photos"):
        path = root / sub
        if os.path.lexists(path) and not is_real_folder(path):
            what = "a symlink" if path.is_symlink() else "not a folder"
            raise _refuse(root, f"holds {sub!r} that is {what}, which livecam never follows")


def _foreign_entry(root: Path) -> str | None:
    """The first thing (relative path) under ``root`` that livecam's layout does not have,
    or None: only livecam's files, in livecam's folders."""
    for entry in sorted(os.listdir(root)):
        if entry not in ROOT_ENTRIES and not _is_temp(entry):
            return entry
    identities = root / "identities"
    if identities.is_dir():
        for entry in sorted(os.listdir(identities)):
            path = identities / entry
            if not (_is_temp(entry) or (entry.endswith((".json", ".jpg"))
                                        and stat.S_ISREG(os.lstat(path).st_mode))):
                return f"identities/{entry}"
    photos = root / "photos"
    if photos.is_dir():
        for entry in sorted(os.listdir(photos)):
            folder = photos / entry
            if not (SHA256_RE.fullmatch(entry) and is_real_folder(folder)):
                return f"photos/{entry}"
            for name in sorted(os.listdir(folder)):
                if name not in PHOTO_FILES and not _is_temp(name):
                    return f"photos/{entry}/{name}"
    return None


def check_ownable(root: Path) -> None:
    """Raise :class:`IdentityError` (one line) unless livecam may write the library ``root``:
    it does not exist yet, is empty, holds livecam's record, or holds only livecam's layout
    (a library from before the record). Writes nothing. Any thread."""
    if not os.path.lexists(root):
        return
    if not root.is_dir():
        return  # the library says "is a file" in its own words
    _check_subfolders(root)
    if os.path.lexists(root / RECORD_NAME):
        return
    foreign = _foreign_entry(root)
    if foreign is not None:
        raise _refuse(root, f"holds {foreign!r}, which livecam did not write")


def read_owned(root: Path) -> set[str]:
    """The photo folders (sha256 names) the record lists; for a missing or damaged record,
    the photo folders that hold only livecam's files (what an adoption would list)."""
    try:
        data = json.loads((root / RECORD_NAME).read_text(encoding="utf-8"))
        listed = data["photos"]
        if isinstance(listed, list) and all(isinstance(s, str) for s in listed):
            return {s for s in listed if SHA256_RE.fullmatch(s)}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    photos = root / "photos"
    if not is_real_folder(photos):
        return set()
    return {entry for entry in os.listdir(photos)
            if SHA256_RE.fullmatch(entry) and is_real_folder(photos / entry)
            and all(n in PHOTO_FILES or _is_temp(n) for n in os.listdir(photos / entry))}


def write_owned(root: Path, owned: Iterable[str]) -> None:
    """Write the record listing ``owned`` photo folders. Only under the library's write lock."""
    body = {"livecam_library": _RECORD_FORMAT, "photos": sorted(set(owned))}
    atomic_write(root / RECORD_NAME, (json.dumps(body, indent=1) + "\n").encode("utf-8"))


def remove_photo_folder(folder: Path) -> bool:
    """Remove livecam's files from the photo folder ``folder``, then the folder if that left
    it empty; True when it is gone. Never follows a symlink. Under the write lock only."""
    if not is_real_folder(folder):
        return not os.path.lexists(folder)
    remove_temp_files(folder)
    for name in PHOTO_FILES:
        path = folder / name
        if os.path.lexists(path):
            path.unlink()
    try:
        folder.rmdir()
    except OSError:
        log.warning("kept %s: it holds files livecam did not write", folder)
        return False
    return True

"""The folders ``livecam serve`` makes for uploaded photos, and their removal: **livecam deletes
only what it created**, also after a crash.

Each session's folder ``<photo_dir>/<session id>/`` (mode 0700) carries a marker file
``.livecam-session`` written when the folder is made (O_EXCL, text naming the folder), and the
server holds the marker locked (:func:`livecam.core.fd_lock.try_lock`: ``flock``;
``msvcrt.locking`` on Windows) for the session's life.
The kernel drops that lock when the process dies, however it dies (``kill -9`` included), so at
the next start :func:`sweep` can tell a crashed run's folders (marker unlocked) from those of
another ``livecam serve`` that shares the folder and still runs (marker locked: left alone).

What is removed, at a session's end or by :func:`sweep`: a folder under ``photo_dir`` with a
session id's name, that is a real directory (a symlink is never followed), whose marker is a
regular file of this user with the expected text; in it only the marker and the photo files the
server writes (``<k>.jpg``/``<k>.png``, regular files). Anything else in the folder (a file or
link someone put there) stays, and so does the folder, with a warning. On POSIX every step goes
through file descriptors opened with ``O_NOFOLLOW`` relative to the folder's own descriptor, so
a folder swapped for a link after the check is not followed either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import sys
from pathlib import Path

from livecam.core.fd_lock import try_lock

log = logging.getLogger(__name__)

MARKER = ".livecam-session"
#: ``secrets.token_urlsafe(16)``, the WHIP session ids the folders are named by.
SESSION_NAME = re.compile(r"^[A-Za-z0-9_-]{22}$")
#: the photo files the server writes into a session's folder.
PHOTO_NAME = re.compile(r"^[0-9]{1,9}\.(jpg|png)$")


def marker_text(name: str) -> bytes:
    """The marker's exact content for the folder ``name``."""
    return (f"livecam serve: photos of WHIP session {name}; this folder is removed when the "
            "session ends or at the next start after a crash\n").encode()


if sys.platform == "win32":
    _REPARSE = 0x400  # FILE_ATTRIBUTE_REPARSE_POINT: symlinks and junctions

    def _is_plain(path: Path, want_dir: bool) -> bool:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return not (st.st_file_attributes & _REPARSE) and (
            stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode))

    class _Dir:
        """A folder by path (Windows has no ``dir_fd``): each name is checked not to be a
        reparse point just before it is used."""

        def __init__(self, parent: Path, name: str) -> None:
            self.path = parent / name
            if not _is_plain(self.path, want_dir=True):
                raise NotADirectoryError(f"{self.path} is not a plain folder")

        def names(self) -> list[str]:
            return os.listdir(self.path)

        def is_file(self, name: str) -> bool:
            return _is_plain(self.path / name, want_dir=False)

        def open(self, name: str, flags: int, mode: int = 0o600) -> int:
            if not flags & os.O_CREAT and not self.is_file(name):
                raise FileNotFoundError(f"{self.path / name} is not a plain file")
            return os.open(self.path / name, flags | os.O_BINARY, mode)

        def unlink(self, name: str) -> None:
            os.unlink(self.path / name)

        def close(self) -> None:
            pass

    def _rmdir(parent: Path, name: str) -> None:
        os.rmdir(parent / name)

    def _owned_by_me(fd: int) -> bool:
        return stat.S_ISREG(os.fstat(fd).st_mode)
else:
    class _Dir:
        """A folder held by a descriptor opened without following a link; every name in it is
        used relative to that descriptor."""

        def __init__(self, parent: Path, name: str) -> None:
            self.path = parent / name
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

        def names(self) -> list[str]:
            with os.scandir(self.fd) as it:
                return [e.name for e in it]

        def is_file(self, name: str) -> bool:
            try:
                return stat.S_ISREG(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
            except OSError:
                return False

        def open(self, name: str, flags: int, mode: int = 0o600) -> int:
            return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=self.fd)

        def unlink(self, name: str) -> None:
            os.unlink(name, dir_fd=self.fd)

        def close(self) -> None:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

    def _rmdir(parent: Path, name: str) -> None:
        os.rmdir(parent / name)  # a link is not removed by rmdir: it fails on one

    def _owned_by_me(fd: int) -> bool:
        st = os.fstat(fd)
        return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()


def _try_lock(fd: int) -> bool:
    """Lock the marker ``fd`` if no running server holds it (:func:`try_lock`); False also
    where the lock fails otherwise (no locks on that file system): a folder whose marker cannot
    be locked is never removed."""
    try:
        return try_lock(fd)
    except OSError:
        return False


class SessionFolder:
    """The folder this process made for one session's photos, its marker held locked until
    :meth:`remove`. Construct with :meth:`make`. Not thread-safe (the server's loop)."""

    def __init__(self, root: Path, name: str, folder: _Dir, marker_fd: int) -> None:
        self.root = root
        self.name = name
        self.path = root / name
        self._dir = folder
        self._marker_fd = marker_fd

    @classmethod
    def make(cls, root: Path, name: str) -> SessionFolder:
        """Make ``root/name`` (``name`` a session id; the folder must not exist) with its
        marker, locked. Raises OSError."""
        if not SESSION_NAME.match(name):
            raise ValueError(f"{name!r} is not a session id")
        root.mkdir(parents=True, exist_ok=True)
        os.mkdir(root / name, 0o700)
        folder = _Dir(root, name)
        fd = folder.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_RDWR)
        os.write(fd, marker_text(name))
        if not _try_lock(fd):  # cannot be: the file is new
            raise OSError(f"the marker of {root / name} could not be locked")
        return cls(root, name, folder, fd)

    def write(self, filename: str, data: bytes) -> Path:
        """A new photo file ``filename`` (a :data:`PHOTO_NAME`) in the folder with ``data``."""
        if not PHOTO_NAME.match(filename):
            raise ValueError(f"{filename!r} is not a photo file name")
        fd = self._dir.open(filename, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return self.path / filename

    def unlink(self, filename: str) -> None:
        """Remove the photo file ``filename`` (gone already: nothing)."""
        if PHOTO_NAME.match(filename) and self._dir.is_file(filename):
            with contextlib.suppress(FileNotFoundError):
                self._dir.unlink(filename)

    def remove(self) -> None:
        """Remove the photos, the marker and the folder (what was put there by others stays,
        and the folder with it). Idempotent."""
        if self._marker_fd < 0:
            return
        fd, self._marker_fd = self._marker_fd, -1
        _remove_ours(self.root, self.name, self._dir, fd)


def _remove_ours(root: Path, name: str, folder: _Dir, marker_fd: int) -> bool:
    """Remove what the server made in ``folder`` (its marker ``marker_fd`` held locked by this
    process), then the folder when nothing else is in it. Closes ``marker_fd`` and ``folder``.
    True when the folder is gone."""
    try:
        left = []
        for entry in folder.names():
            if entry == MARKER:
                continue
            if PHOTO_NAME.match(entry) and folder.is_file(entry):
                with contextlib.suppress(FileNotFoundError):
                    folder.unlink(entry)
            else:
                left.append(entry)
        os.close(marker_fd)  # the lock with it (Windows cannot unlink an open file)
        marker_fd = -1
        if left:
            log.warning("photo folder %s: kept, it holds what livecam did not make (%s)",
                        root / name, ", ".join(sorted(left)[:5]))
            return False
        with contextlib.suppress(FileNotFoundError):
            folder.unlink(MARKER)
    finally:
        if marker_fd >= 0:
            os.close(marker_fd)
        folder.close()
    try:
        _rmdir(root, name)
    except OSError as exc:
        log.warning("photo folder %s: not removed (%s)", root / name, exc.strerror)
        return False
    return True


def sweep(root: Path) -> int:
    """Remove the session folders under ``root`` that a ``livecam serve`` no longer running
    made (see the module docstring for what counts as made by it); the number removed.
    Nothing else under ``root`` is touched; a missing ``root`` is nothing to do."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return 0
    removed = 0
    for name in names:
        if not SESSION_NAME.match(name):
            continue
        try:
            folder = _Dir(root, name)  # a link, or not a folder: not ours
        except OSError:
            continue
        fd = _open_marker(folder, name)
        if fd is None:
            folder.close()
            continue
        removed += _remove_ours(root, name, folder, fd)
    if removed:
        log.info("removed %d photo folder(s) an earlier livecam serve left in %s", removed, root)
    return removed


def _open_marker(folder: _Dir, name: str) -> int | None:
    """The folder's marker, open and locked by this process, when it is a plain file of this
    user with the text for ``name`` and no running process holds it; else None."""
    if not folder.is_file(MARKER):
        return None
    try:
        fd = folder.open(MARKER, os.O_RDWR)
    except OSError:
        return None
    expected = marker_text(name)
    ok = False
    try:
        ok = (_owned_by_me(fd) and os.read(fd, len(expected) + 1) == expected
              and _try_lock(fd))  # locked: its server still runs
    finally:
        if not ok:
            os.close(fd)
    return fd if ok else None

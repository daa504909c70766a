"""The control API's token: generated on first start, kept in a 0600 file, compared in constant
time.

One token per user (not per run) so that `livecam ctl`, a saved OBS dock URL and a Prometheus
scrape config keep working across restarts. Delete the file to rotate it.

The file appears with its whole token or not at all (a temp file beside it, linked to its
name), made under a file lock beside it (:func:`token_lock_path`): a livecam killed while it
makes the token (``kill -9``, a power cut) leaves nothing that stops the next start, the next
creator removes the temp file it left, and two livecams that start at once use one token.
An empty token file (what a livecam before this left when killed that way) is replaced by
the next start, under the same lock.

A token file another user owns (the file, or a link's target) is refused: that user knows the
token. A token file that is a symbolic link is read through (dotfile managers link config
files), but nothing is ever written through one: a link to an empty file or to none is
refused, saying to delete the link. No livecam left it (its creates, the old ``O_EXCL`` one
and the hard link now, fail on a link), so whoever made the link chose where a new secret
would go: a file they can read, or one they can later swap for a token they know.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import secrets
import stat
import sys
from pathlib import Path

from livecam.core.errors import ConfigError
from livecam.core.files import atomic_create, atomic_write, remove_temp_files, temp_files
from livecam.core.locks import held_if_free, holding

log = logging.getLogger(__name__)

TOKEN_FILE_NAME = "api-token"
_TOKEN_BYTES = 32
_MAX_TOKEN_FILE_BYTES = 4096

#: How long a start waits for another livecam that is creating the token, s. A create takes
#: milliseconds, and the lock of one that was killed is dropped at once: a wait this long
#: is a hung process, or a lock a network file system keeps for a client that is gone.
TOKEN_LOCK_WAIT_S = 30.0


def default_token_path() -> Path:
    """``api-token`` in the user config dir (``~/.config/livecam`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("livecam", appauthor=False)) / TOKEN_FILE_NAME


def token_path(configured: str) -> Path:
    """The token file for ``advanced.control.token_file`` (empty = the default)."""
    return Path(configured).expanduser() if configured else default_token_path()


def read_token(path: Path) -> str:
    """The token in ``path``; :class:`ConfigError` saying what to do when there is none, or
    when ``path`` is no token file (a folder, a device, a file of other text or of bytes)."""
    try:
        if not path.is_file() and path.exists():
            raise ConfigError(f"control API token {path} is not a file: set "
                              "advanced.control.token_file to a file's path (livecam makes the "
                              "token there)")
        if path.stat().st_size > _MAX_TOKEN_FILE_BYTES:
            raise _not_a_token(path)
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        if path.is_symlink():
            raise _link_to_no_token(path, "does not exist") from None
        raise ConfigError(f"no control API token at {path}: start `livecam run` or `livecam "
                          "daemon` once (it creates the token), or pass --token-file") from None
    except UnicodeDecodeError:
        raise _not_a_token(path) from None
    except OSError as exc:
        raise ConfigError(f"control API token {path} cannot be read: {exc.strerror}") from None
    if not token:
        if path.is_symlink():
            raise _link_to_no_token(path, "is empty")
        raise ConfigError(f"control API token file {path} is empty: start `livecam run` or "
                          "`livecam daemon` once (it writes a new token there)")
    if any(c.isspace() for c in token):
        raise _not_a_token(path)
    return token


def _not_a_token(path: Path) -> ConfigError:
    return ConfigError(f"{path} does not hold a livecam token (one word of ASCII text): set "
                       "advanced.control.token_file to another path, or delete the file if it is "
                       "an old token")


def _link_to_no_token(path: Path, why: str) -> ConfigError:
    """The error for a token file that is a link to an empty file or to none (``why``): a
    new token is never written through a link (see the module's docstring)."""
    try:
        target = os.readlink(path)
    except OSError:  # replaced by a file meanwhile: the next start reads that
        target = "another path"
    return ConfigError(f"control API token file {path} is a symbolic link to {target}, "
                       f"which {why}: livecam writes a new token only to a plain file, never "
                       f"through a link; delete the link {path} and start `livecam run` or "
                       "`livecam daemon` (it creates a new token there), or set "
                       "advanced.control.token_file to another path")


def token_lock_path(path: Path) -> Path:
    """The lock every livecam holds while it creates the token file ``path``
    (``.<name>.lock`` beside it)."""
    return path.with_name(f".{path.name}.lock")


def load_or_create_token(path: Path) -> str:
    """Read the token at ``path`` or create it (mode 0600, folder 0700) on first start.

    Two processes that create it at once both return the first one's token; one that was
    killed while it created it left no file or a whole one (see the module's docstring).
    A token file others can read is tightened to 0600 with a warning rather than refused, so
    an over-eager backup restore does not lock the user out. Any thread.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:  # a file where the folder should be, no permission, read-only
        raise _cannot_create(path, exc) from None
    _check_folder(path)
    if not os.path.lexists(path):
        created = _create_token(path)
        if created is not None:
            return created
    elif _is_empty_file(path):
        replaced = _replace_empty_token(path)
        if replaced is not None:
            return replaced
    elif temp_files(path.parent, path.name):
        _remove_temp_files_if_free(path)
    token = read_token(path)  # first: only a token file is tightened, never another one
    _check_owner(path)
    _tighten(path)
    return token


def _create_token(path: Path) -> str | None:
    """The token this process wrote to the new file ``path``; None when another process made
    the file first."""
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    try:
        with holding(token_lock_path(path), f"creating the control API token {path}",
                     wait_s=TOKEN_LOCK_WAIT_S, error=ConfigError, logger=log):
            # under the lock: a temp file found is a killed creator's, never one under way
            remove_temp_files(path.parent, path.name)
            if os.path.lexists(path):
                return None
            try:
                atomic_create(path, f"{token}\n".encode("ascii"), mode=0o600)
            except FileExistsError:  # made by a livecam that takes no lock (an older one)
                return None
    except OSError as exc:  # no lock file or token there (no permission, read-only)
        raise _cannot_create(path, exc) from None
    log.info("created the control API token %s (mode 600)", path)
    return token


def _is_empty_file(path: Path) -> bool:
    """``path`` is a regular file (not a link) with nothing in it."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def _replace_empty_token(path: Path) -> str | None:
    """A new token in place of the empty file ``path``, which a livecam older than the
    atomic create left when it was killed between making the file and writing it (so nobody
    can be using a token from it); None if it holds something by the time the lock is held."""
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    try:
        with holding(token_lock_path(path), f"replacing the empty control API token {path}",
                     wait_s=TOKEN_LOCK_WAIT_S, error=ConfigError, logger=log):
            if not _is_empty_file(path):
                return None
            remove_temp_files(path.parent, path.name)
            atomic_write(path, f"{token}\n".encode("ascii"))  # a temp file of mode 600
    except OSError as exc:
        raise _cannot_create(path, exc) from None
    log.warning("the control API token file %s was empty (left by a livecam stopped while "
                "it made it): wrote a new token to it", path)
    return token


def _remove_temp_files_if_free(path: Path) -> None:
    """Remove the temp files of creators killed after they linked the token (a second name of
    it, which nothing reads) if no creator holds the lock now; else the next start does."""
    with held_if_free(token_lock_path(path)) as free:
        if free:
            remove_temp_files(path.parent, path.name)


def _check_owner(path: Path) -> None:
    """Refuse a token file that another user owns, or a link to it that another user made:
    that user knows the token (or the one word the link points at: ``/etc/hostname`` as
    root), or can replace it, and would control this livecam. Root could read any such file
    and set it to 600, so mode checks alone do not stop this (a ``advanced.control.token_file`` in
    /tmp, made there first by someone else)."""
    if sys.platform == "win32":
        return  # no POSIX owner there: the file's ACLs (the user's profile) protect it
    me = os.geteuid()
    try:
        owners = {os.lstat(path).st_uid, path.stat().st_uid}  # the link's, and the file's
    except OSError as exc:  # removed since it was read
        raise ConfigError(f"control API token {path} cannot be read: {exc.strerror}") from None
    others = sorted(owners - {me})
    if others:
        raise ConfigError(
            f"control API token {path} (or the link to it) belongs to another user (uid "
            f"{others[0]}, livecam runs as uid {me}), who can read or replace it and so "
            "control livecam: delete it (or the link) so livecam creates its own, or set "
            "advanced.control.token_file to a path in a folder only you can write")


def _check_folder(path: Path) -> None:
    """Refuse a token file in a folder that another user can write (or owns): they could
    delete the token whenever they like, so every start makes a new one (each saved dock URL
    and script breaks), or swap in a token they know between two starts. A folder with the
    sticky bit (``/tmp``) lets no one else remove or rename the file, so it passes (the file's
    own owner is checked by :func:`_check_owner`); so does root's. The folder of a link's
    target is checked as well."""
    if sys.platform == "win32":
        return  # no POSIX modes there: the folder's ACLs (the user's profile) protect it
    me = os.geteuid()
    folders = [path.parent]
    with contextlib.suppress(OSError):
        real = Path(os.path.realpath(path)).parent
        if real != path.parent:
            folders.append(real)
    for folder in folders:
        try:
            st = os.stat(folder)
        except OSError:  # a link's target folder that is gone: reading the token says so
            continue
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in (me, 0):
            why = f"belongs to another user (uid {st.st_uid})"
        elif (mode & 0o002 or (mode & 0o020 and not _own_group(st.st_gid))) \
                and not mode & stat.S_ISVTX:
            why = f"can be written by other users (mode {mode:o})"
        else:
            continue
        raise ConfigError(
            f"control API token folder {folder} {why}, who could delete or replace the token "
            f"{path}: `chmod go-w {folder}` if it is yours, or set advanced.control.token_file to "
            "a path in a folder only you can write")


def _own_group(gid: int) -> bool:
    """``gid`` is this user's private group (named as the user, their primary group, and no
    one else listed in it): where the default umask is 002, folders are group-writable and
    that is only the user."""
    if sys.platform == "win32":
        return False
    import grp
    import pwd

    try:
        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except KeyError:  # no such user or group in the databases: not known to be private
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def _tighten(path: Path) -> None:
    """Set a token file others can read to 0600, with a warning."""
    if sys.platform == "win32":
        return  # a mode there only says read-only (any writable file reads 666): ACLs protect it
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning("control API token %s had mode %o; setting it to 600", path, mode)
        try:
            os.chmod(path, 0o600)
        except OSError as exc:  # not the owner (a link to another user's file), read-only
            # a token other users can read lets them control livecam: stop, say what to do
            raise ConfigError(
                f"control API token {path} can be read by other users (mode {mode:o}) and "
                f"livecam cannot set it to 600 ({exc.strerror or exc}): `chmod 600` it as "
                "its owner, or delete it (or the link) so livecam creates its own, or set "
                "advanced.control.token_file to another path") from None


def _cannot_create(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"control API token {path} cannot be created ({exc.strerror or exc}): "
                       "set advanced.control.token_file to a path in a folder you can write")


def token_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison, so response timing does not leak the token. ``given`` is
    whatever a client sent: a header's bytes that are not UTF-8 reach here as lone
    surrogates (aiohttp decodes with ``surrogateescape``), which never match, never raise."""
    if not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "surrogatepass"))

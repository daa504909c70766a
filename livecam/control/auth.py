"""The control API's token: generated on first start, kept in a 0600 file, compared in constant
time.

One token per user (not per run) so that `livecam ctl`, a saved OBS dock URL and a Prometheus
scrape config keep working across restarts. Delete the file to rotate it.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

TOKEN_FILE_NAME = "api-token"
_TOKEN_BYTES = 32
_MAX_TOKEN_FILE_BYTES = 4096


def default_token_path() -> Path:
    """``api-token`` in the user config dir (``~/.config/livecam`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("livecam", appauthor=False)) / TOKEN_FILE_NAME


def token_path(configured: str) -> Path:
    """The token file for ``control.token_file`` (empty = the default)."""
    return Path(configured).expanduser() if configured else default_token_path()


def read_token(path: Path) -> str:
    """The token in ``path``; :class:`ConfigError` saying what to do when there is none, or
    when ``path`` is no token file (a folder, a device, a file of other text or of bytes)."""
    try:
        if not path.is_file() and path.exists():
            raise ConfigError(f"control API token {path} is not a file: set "
                              "control.token_file to a file's path (livecam makes the token "
                              "there)")
        if path.stat().st_size > _MAX_TOKEN_FILE_BYTES:
            raise _not_a_token(path)
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise ConfigError(f"no control API token at {path}: start `livecam run` or `livecam "
                          "daemon` once (it creates the token), or pass --token-file") from None
    except UnicodeDecodeError:
        raise _not_a_token(path) from None
    except OSError as exc:
        raise ConfigError(f"control API token {path} cannot be read: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"control API token file {path} is empty: delete it and restart "
                          "livecam to make a new one")
    if any(c.isspace() for c in token):
        raise _not_a_token(path)
    return token


def _not_a_token(path: Path) -> ConfigError:
    return ConfigError(f"{path} does not hold a livecam token (one word of ASCII text): set "
                       "control.token_file to another path, or delete the file if it is an "
                       "old token")


def load_or_create_token(path: Path) -> str:
    """Read the token at ``path`` or create it (mode 0600, folder 0700) on first start.

    A token file others can read is tightened to 0600 with a warning rather than refused, so an
    over-eager backup restore does not lock the user out.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:  # a file where the folder should be, no permission, read-only
        raise _cannot_create(path, exc) from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        token = read_token(path)  # first: only a token file is tightened, never another one
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning("control API token %s had mode %o; setting it to 600", path, mode)
            os.chmod(path, 0o600)
        return token
    except OSError as exc:
        raise _cannot_create(path, exc) from None
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    # os.open's mode is filtered by the umask; set it explicitly so it is exactly 0600.
    os.chmod(path, 0o600)
    log.info("created the control API token %s (mode 600)", path)
    return token


def _cannot_create(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"control API token {path} cannot be created ({exc.strerror or exc}): "
                       "set control.token_file to a path in a folder you can write")


def token_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison, so response timing does not leak the token."""
    if not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))

"""Users' WHIP tokens for ``livecam serve``: one per user, kept as sha256 hashes in a 0600
JSON file (``advanced.serve.tokens_file``; default ``serve-tokens.json`` beside the control token).

``livecam serve token add NAME`` makes a token and prints it once (it is not stored, only its
hash: a copy of the file lets nobody in); ``token remove NAME`` revokes it, also for a running
server (the file is read at each offer). Tokens are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from pathlib import Path

from livecam.core.errors import ConfigError, UsageError
from livecam.core.files import atomic_write

TOKENS_FILE_NAME = "serve-tokens.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MAX_FILE_BYTES = 1 << 20


def tokens_path(configured: str) -> Path:
    """The tokens file for ``advanced.serve.tokens_file`` (empty: beside the control token)."""
    if configured:
        return Path(configured).expanduser()
    from livecam.control.auth import default_token_path

    return default_token_path().parent / TOKENS_FILE_NAME


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The users and their token hashes in ``path``. Any thread; every call reads the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, str]:
        try:
            if self.path.stat().st_size > _MAX_FILE_BYTES:
                raise ConfigError(f"{self.path} is not a livecam tokens file (over 1 MiB)")
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (ValueError, UnicodeDecodeError):
            raise ConfigError(f"{self.path} is not a livecam tokens file (not JSON): move "
                              "it away and add the users again") from None
        users = data.get("users") if isinstance(data, dict) else None
        if not isinstance(users, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in users.items()):
            raise ConfigError(f"{self.path} is not a livecam tokens file: move it away and "
                              "add the users again")
        return users

    def _save(self, users: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.path, json.dumps({"users": users}, indent=1).encode())
        self.path.chmod(0o600)

    def names(self) -> list[str]:
        return sorted(self._load())

    def add(self, name: str) -> str:
        """A new token for user ``name`` (replacing theirs); returned once, stored hashed."""
        if not _NAME.match(name):
            raise UsageError(f"user name {name!r}: use letters, digits, '_', '.', '-' "
                             "(at most 64, starting with a letter or digit)")
        token = secrets.token_urlsafe(32)
        users = self._load()
        users[name] = _digest(token)
        self._save(users)
        return token

    def remove(self, name: str) -> None:
        users = self._load()
        if users.pop(name, None) is None:
            raise UsageError(f"no user {name!r} (users: {', '.join(sorted(users)) or 'none'})")
        self._save(users)

    def user_of(self, token: str) -> str | None:
        """The user whose token this is, else None (every user compared: constant time)."""
        digest = _digest(token)
        found = None
        for name, stored in self._load().items():
            if hmac.compare_digest(stored, digest):
                found = name
        return found

"""The identity a library was last run with, remembered in the user's state dir.

``livecam run`` without ``--identity`` uses it (else the library's first identity), so a
forgotten option never sends the real face. One small JSON file maps each library folder
(resolved path) to a name; a missing, unreadable or damaged file counts as empty. Any thread.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from livecam.config.identity import IdentityConfig

log = logging.getLogger(__name__)


def state_file() -> Path:
    """``last_identity.json`` in the platformdirs user state dir (XDG_STATE_HOME on Linux)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("livecam", appauthor=False)) / "last_identity.json"


def _library_key(config: IdentityConfig) -> str:
    from livecam.identity.library import default_library_dir

    root = Path(config.library_dir).expanduser() if config.library_dir else default_library_dir()
    return str(root.resolve())


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, str)}


def recall(config: IdentityConfig) -> str | None:
    """The identity last used with this library, or None."""
    return _read(state_file()).get(_library_key(config))


def remember(config: IdentityConfig, name: str) -> None:
    """Record ``name`` as this library's last used identity (atomic write); a state dir that
    cannot be written is logged at DEBUG and otherwise ignored: remembering is a convenience."""
    path = state_file()
    data = _read(path)
    data[_library_key(config)] = name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".last_identity.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("could not remember the last identity in %s: %s", path, exc)


def choose_default(config: IdentityConfig, names: tuple[str, ...]) -> str | None:
    """The identity for a run started without ``--identity``: the last used one if it is still
    in ``names``, else the first of ``names``; None for an empty library. Logs which."""
    if not names:
        return None  # warned by the caller once the run has started (livecam.pipeline.streams)
    last = recall(config)
    if last in names:
        log.info("no --identity given: using %r, the identity last used (--identity NAME "
                 "picks another; known: %s)", last, ", ".join(names))
        return last
    log.info("no --identity given: using %r, the library's first identity (--identity NAME "
             "picks another; known: %s)", names[0], ", ".join(names))
    return names[0]


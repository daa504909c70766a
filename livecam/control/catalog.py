"""Where the control sources find identity names and thumbnails: the identity library.

A small protocol so the API and panel do not depend on how the library stores things, and tests
can hand in a catalog of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from livecam.config.identity import IdentityConfig

if TYPE_CHECKING:  # the library imports OpenCV; load it only when a name is asked for
    from livecam.identity.library import IdentityLibrary


class IdentityCatalog(Protocol):
    """Identity names in display order and their thumbnails. Any thread may call."""

    def names(self) -> tuple[str, ...]: ...

    def thumbnail_jpeg(self, name: str) -> bytes | None:
        """A small JPEG of the identity's face, or None when there is none."""
        ...


class LibraryCatalog:
    """The identity library named by the ``identity`` config section (read on every call, so
    a reload or a `livecam identity add` in another process shows up)."""

    def __init__(self, config: IdentityConfig) -> None:
        self._config = config

    def _library(self) -> IdentityLibrary:
        from livecam.identity.library import IdentityLibrary

        return IdentityLibrary.from_config(self._config)

    def names(self) -> tuple[str, ...]:
        return tuple(self._library().names())

    def thumbnail_jpeg(self, name: str) -> bytes | None:
        from livecam.core.errors import IdentityError

        try:
            path: Path = self._library().get(name).thumb_path
            return path.read_bytes()
        except (IdentityError, OSError):
            return None

""":class:`Identity`: a named source person, and the :class:`IdentitySource` seam the swap uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class IdentityPhoto:
    """One photo of an identity: ``texture_bgr`` (h, w, 3) uint8 face crop, ``landmarks_xy``
    (468, 2) float32 and ``landmarks_z`` (468,) float32 in its pixels."""

    sha256: str
    texture_bgr: ImageBGR
    landmarks_xy: FloatArray
    landmarks_z: FloatArray
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Identity:
    """A named person: one or more photos (the swap picks the one nearest the live pose)."""

    name: str
    photos: tuple[IdentityPhoto, ...]


class IdentitySource(Protocol):
    """Anything that loads identities by name (the library, or in-memory ones for tests and
    ``--source PHOTO``). ``load`` raises :class:`livecam.core.errors.IdentityError` for an unknown
    or unusable name; the pipeline thread calls it when the active identity changes."""

    def load(self, name: str) -> Identity: ...


class IdentityCollection:
    """Several identity sources in order: the first that knows a name wins.

    Use it to put one-off identities (``--source PHOTO``) in front of the library.
    """

    def __init__(self, *sources: IdentitySource | dict[str, Identity]) -> None:
        self._sources = sources

    def load(self, name: str) -> Identity:
        from livecam.core.errors import IdentityError

        last: IdentityError | None = None
        for source in self._sources:
            if isinstance(source, dict):
                if name in source:
                    return source[name]
                continue
            try:
                return source.load(name)
            except IdentityError as exc:
                last = exc
        raise last or IdentityError(f"no identity named {name!r}")

"""Identities: named source faces, stored in a library keyed by photo sha256.

Public API: :class:`IdentityLibrary` (add/list/get/remove/load), :class:`Identity`,
:class:`IdentityPhoto`, :class:`IdentitySource` (what the swap stage loads from),
:class:`IdentityCollection` and :func:`identity_from_photo` (a one-off identity for
``livecam run --source PHOTO``).
"""

from __future__ import annotations

from pathlib import Path

from livecam.config.identity import IdentityConfig
from livecam.identity.library import IdentityLibrary, default_library_dir, validate_name
from livecam.identity.model import Identity, IdentityCollection, IdentityPhoto, IdentitySource


def identity_from_photo(path: str | Path, config: IdentityConfig | None = None,
                        name: str | None = None) -> Identity:
    """A one-off identity from one photo (not stored). Quality warnings are logged, not fatal;
    unusable photos raise :class:`livecam.core.errors.IdentityError`. Heavy (~0.3 s)."""
    import logging

    from livecam.identity.photo import prepare_photo, read_photo

    cfg = config or IdentityConfig()
    image, data = read_photo(path, max_megapixels=cfg.max_photo_megapixels)
    prep = prepare_photo(image, data, cfg, label=str(path))
    for warning in (*prep.warnings, *prep.notes):
        logging.getLogger(__name__).warning("%s: %s", path, warning)
    photo = IdentityPhoto(sha256=prep.sha256, texture_bgr=prep.texture_bgr,
                          landmarks_xy=prep.landmarks_xy, landmarks_z=prep.landmarks_z,
                          warnings=prep.warnings)
    return Identity(name=name or f"photo:{Path(path).name}", photos=(photo,))


__all__ = [
    "Identity",
    "IdentityCollection",
    "IdentityLibrary",
    "IdentityPhoto",
    "IdentitySource",
    "default_library_dir",
    "identity_from_photo",
    "validate_name",
]

"""Photos a WHIP session uploads as its own identity, under the rules a local photo
meets::

    POST /whip/ID/photo   Content-Type: image/jpeg | image/png, the session user's token,
                          the photo's bytes (at most ``advanced.serve.max_photo_bytes``)
                       -> 200 JSON {"identity": NAME, "warnings": [...], "state": ...}

The photo is written into a folder of its own that the server makes for the session under
``advanced.serve.photo_dir`` (default ``serve-photos`` in the user cache dir), read under the
rules of
``livecam run --source PHOTO`` (``advanced.capture.max_image_megapixels``, one face found; quality
problems are warnings, not refusals) and made the session's identity at its next frame.
The name (``photo-<session>-<k>``) is the session's alone: another session can neither select
nor see it. A new upload replaces the session's previous one. When the session ends, its
identity is forgotten and its folder removed: the server deletes only what it made. Folders a
crashed server left (``kill -9``, a power cut) are removed at the next start
(:func:`~livecam.remote.photo_folders.sweep`: only folders with the marker livecam writes, never
through a symlink, never another running server's).

**A photo the server still holds is not sent again** (a reconnecting thin client)::

    POST /whip/ID/photo   Content-Type: application/json, {"sha256": HEX of the photo's bytes}
                       -> 200 as above, the session's identity built from that photo
                       -> 404 "send its bytes": this user sent no such photo in the last
                          ``advanced.serve.photo_keep_s``

The server keeps each user's two newest photos' identities (in memory, never on disk, by the
sha256 of their bytes) for ``photo_keep_s`` after their last use, for that user only: another
user's token cannot learn whether a photo was sent. 0 keeps none (every session sends its
bytes). A photo known by its hash costs a ~100-byte request and no face detection.

Refusals, before the body is read where the headers say enough: another user's session 404,
no or wrong ``Content-Type`` 415, no ``Content-Length`` 411, over the limit 413, a body that
is not the image its type says 415, a photo that cannot be used (not decodable, no face, too
many pixels) 422 with the reason. One photo is processed at a time (face detection and the
face mesh, about 0.3 s on a CPU), so a flood of uploads cannot take the frame threads' cores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from livecam.config.identity import IdentityConfig
from livecam.identity.model import Identity
from livecam.remote.photo_folders import SessionFolder, sweep

log = logging.getLogger(__name__)

#: The photo types taken, with the first bytes of such a file.
PHOTO_TYPES = {"image/jpeg": b"\xff\xd8\xff", "image/png": b"\x89PNG\r\n\x1a\n"}
_BODY_TIMEOUT_S = 30.0


def default_photo_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("livecam", appauthor=False)) / "serve-photos"


def photo_type(data: bytes) -> str | None:
    """The content type whose signature ``data`` starts with (None: neither JPEG nor PNG)."""
    return next((t for t, magic in PHOTO_TYPES.items() if data.startswith(magic)), None)


@dataclass
class SessionUploads:
    """One session's uploads: its folder (made by the server), its identity names and the
    file of its newest photo."""

    folder: SessionFolder | None = None
    names: list[str] = field(default_factory=list)
    count: int = 0
    newest_file: str = ""


@dataclass
class _Kept:
    identity: Identity
    warnings: list[str]
    t_used: float


class RecentPhotos:
    """Each user's ``per_user`` newest photos' identities by sha256, kept ``keep_s`` after their
    last use (the event loop only)."""

    def __init__(self, keep_s: float, per_user: int = 2,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._keep_s = keep_s
        self._clock = clock
        self._per_user = per_user
        self._by_user: dict[str, dict[str, _Kept]] = {}

    def put(self, user: str, sha256: str, identity: Identity, warnings: list[str]) -> None:
        if self._keep_s <= 0:
            return
        kept = self._by_user.setdefault(user, {})
        kept.pop(sha256, None)
        kept[sha256] = _Kept(identity, warnings, self._clock())
        while len(kept) > self._per_user:
            kept.pop(next(iter(kept)))  # the least recently used

    def take(self, user: str, sha256: str) -> _Kept | None:
        """The kept photo (its last use now), None when unknown or past ``keep_s``."""
        now = self._clock()
        for name, kept in list(self._by_user.items()):
            for key, item in list(kept.items()):
                if now - item.t_used > self._keep_s:
                    del kept[key]
            if not kept:
                del self._by_user[name]
        kept = self._by_user.get(user, {})
        found = kept.pop(sha256) if sha256 in kept else None
        if found is not None:
            found.t_used = now
            kept[sha256] = found  # the most recently used last
        return found


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class SessionPhotos:
    """Uploaded identities of every session. ``identities`` is the dict the server's
    :class:`~livecam.identity.IdentityCollection` reads first (the pipeline threads load
    from it by name); it is changed on the server's event loop only."""

    def __init__(self, root: Path, identity_config: IdentityConfig, *, max_bytes: int,
                 keep_s: float = 0.0) -> None:
        self.root = root
        self.recent = RecentPhotos(keep_s)
        self.identities: dict[str, Identity] = {}
        self._config = identity_config
        self._max_bytes = max_bytes
        self._sessions: dict[str, SessionUploads] = {}
        self._busy = asyncio.Lock()

    def sweep(self) -> int:
        """Remove the session folders an earlier, no longer running server left under the
        root (a crash); the number removed. Call once at the start, before any upload."""
        return sweep(self.root)

    def names_of(self, session_id: str) -> tuple[str, ...]:
        """The identity names session ``session_id`` uploaded (its newest last)."""
        uploads = self._sessions.get(session_id)
        return tuple(uploads.names) if uploads is not None else ()

    async def upload(self, request: web.Request, session_id: str,
                     user: str) -> tuple[str, list[str]]:
        """Read, store and build the photo of ``request`` (``user``'s) as ``session_id``'s
        identity, or take the one ``user`` sent before by its sha256: (its name, the photo's
        warnings). Raises the aiohttp HTTP error to answer with."""
        kind = request.content_type
        if kind == "application/json":
            return await self._by_hash(request, session_id, user)
        if kind not in PHOTO_TYPES:
            raise web.HTTPUnsupportedMediaType(
                text=f"send the photo as {' or '.join(PHOTO_TYPES)} (got {kind or 'no type'})")
        length = request.content_length
        if length is None:
            raise web.HTTPLengthRequired(text="send the photo with a Content-Length")
        if length > self._max_bytes:
            raise web.HTTPRequestEntityTooLarge(
                max_size=self._max_bytes, actual_size=length,
                text=f"the photo is {length / 1e6:.1f} MB, over this server's limit "
                f"{self._max_bytes / 1e6:.1f} MB (advanced.serve.max_photo_bytes)")
        try:
            async with asyncio.timeout(_BODY_TIMEOUT_S):
                data = await request.content.readexactly(length)
        except TimeoutError:
            raise web.HTTPRequestTimeout(text="the photo did not arrive in "
                                         f"{_BODY_TIMEOUT_S:g} s") from None
        except asyncio.IncompleteReadError:
            raise web.HTTPBadRequest(text="the photo ended before its Content-Length") from None
        if photo_type(data) != kind:
            raise web.HTTPUnsupportedMediaType(text=f"the body is not a {kind} file")
        async with self._busy:
            name, warnings = await self._build(session_id, data, kind)
        self.recent.put(user, hashlib.sha256(data).hexdigest(), self.identities[name], warnings)
        return name, warnings

    async def _by_hash(self, request: web.Request, session_id: str,
                       user: str) -> tuple[str, list[str]]:
        if (request.content_length or 0) > 1024:
            raise web.HTTPRequestEntityTooLarge(max_size=1024,
                                                actual_size=request.content_length or 0)
        try:
            sha256 = (await request.json())["sha256"]
        except (ValueError, KeyError, TypeError):
            raise web.HTTPBadRequest(text='send {"sha256": HEX} or the photo\'s bytes') from None
        if not isinstance(sha256, str) or not _SHA256.match(sha256):
            raise web.HTTPBadRequest(text="sha256 must be 64 lowercase hex digits")
        kept = self.recent.take(user, sha256)
        if kept is None:
            raise web.HTTPNotFound(text="this server does not hold that photo: send its bytes")
        uploads = self._sessions.setdefault(session_id, SessionUploads())
        uploads.count += 1
        name = f"photo-{session_id[:8]}-{uploads.count}"
        self._replace(uploads, name, "")
        self.identities[name] = dataclasses.replace(kept.identity, name=name)
        log.info("session %s: identity %s from a photo it sent before (sha256 %s)",
                 session_id[:8], name, sha256[:12])
        return name, list(kept.warnings)

    def _replace(self, uploads: SessionUploads, name: str, filename: str) -> None:
        """``name`` (its photo ``filename``, "" for none) replaces the session's previous."""
        for old in uploads.names:
            self.identities.pop(old, None)
        if uploads.newest_file and uploads.folder is not None:
            uploads.folder.unlink(uploads.newest_file)
        uploads.names, uploads.newest_file = [name], filename

    async def _build(self, session_id: str, data: bytes, kind: str) -> tuple[str, list[str]]:
        from livecam.core.errors import IdentityError
        from livecam.identity import identity_from_photo

        uploads = self._sessions.setdefault(session_id, SessionUploads())
        uploads.count += 1
        name = f"photo-{session_id[:8]}-{uploads.count}"
        filename = f"{uploads.count}{'.png' if kind == 'image/png' else '.jpg'}"
        try:
            if uploads.folder is None:  # new: the session id is random, never reused
                uploads.folder = await asyncio.to_thread(SessionFolder.make, self.root,
                                                         session_id)
            path = await asyncio.to_thread(uploads.folder.write, filename, data)
        except OSError as exc:
            log.error("photo of session %s not stored: %s", session_id[:8], exc)
            raise web.HTTPInternalServerError(
                text="this server cannot store photos now (its advanced.serve.photo_dir: "
                f"{exc.strerror or exc}); ask its operator") from None
        warnings: list[str] = []

        def build() -> Identity:
            handler = _Collect(warnings)
            logger = logging.getLogger("livecam.identity")
            logger.addHandler(handler)
            try:
                return identity_from_photo(path, self._config, name=name)
            finally:
                logger.removeHandler(handler)

        try:
            identity = await asyncio.to_thread(build)
        except IdentityError as exc:
            uploads.folder.unlink(filename)
            raise web.HTTPUnprocessableEntity(
                text=str(exc).replace(str(path), "the photo")) from None
        self._replace(uploads, name, filename)  # a new upload replaces the previous one
        if self._sessions.get(session_id) is not uploads:  # the session ended meanwhile
            uploads.folder.remove()
            raise web.HTTPNotFound(text="the session ended")
        self.identities[name] = identity
        log.info("session %s: identity %s from an uploaded photo (%d bytes)", session_id[:8],
                 name, len(data))
        return name, [w.replace(str(path), "the photo") for w in warnings]

    def forget(self, session_id: str) -> None:
        """The session ended: its identities are dropped, the folder the server made for it
        removed (nothing else under ``root`` is touched)."""
        uploads = self._sessions.pop(session_id, None)
        if uploads is None:
            return
        for name in uploads.names:
            self.identities.pop(name, None)
        if uploads.folder is not None:
            try:
                uploads.folder.remove()
            except OSError as exc:  # e.g. the folder was removed by hand meanwhile
                log.warning("photo folder %s: not removed (%s)", uploads.folder.path, exc)

    def forget_all(self) -> None:
        for session_id in list(self._sessions):
            self.forget(session_id)


class _Collect(logging.Handler):
    """The warnings ``identity_from_photo`` logs, kept for the answer."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self._into = into

    def emit(self, record: logging.LogRecord) -> None:
        self._into.append(record.getMessage())


def add_photo_route(app: web.Application, photos: SessionPhotos,
                    own_session: Callable[[web.Request], Any],
                    on_uploaded: Callable[[Any, str], Any]) -> None:
    """``POST /whip/{session}/photo`` on ``app``: ``own_session(request)`` is the session of
    the request's user (raises 404 otherwise); ``await on_uploaded(session, name)`` makes the
    new identity the session's and returns the JSON answer's state."""

    async def upload(request: web.Request) -> web.Response:
        session = own_session(request)
        name, warnings = await photos.upload(request, session.id, session.user)
        state = await on_uploaded(session, name)
        return web.json_response({"identity": name, "warnings": warnings, "state": state})

    app.router.add_post("/whip/{session}/photo", upload)

"""``livecam serve``'s WHIP endpoint (RFC 9725) on aiortc::

    POST   /whip     Content-Type: application/sdp, Authorization: Bearer TOKEN, body: the offer
                     -> 201 Created, Location: /whip/ID, Content-Type: application/sdp, the answer
    DELETE /whip/ID  the same user's token -> 200: the session ends, its stream is removed
    GET /whip/ID, POST /whip/ID/command: the session's own state and controls
                     (:mod:`livecam.remote.session_api`)
    POST /whip/ID/photo: a photo as the session's own identity (:mod:`livecam.remote.photos`)

The token is checked before anything else (401 with ``WWW-Authenticate: Bearer``, nothing read
and no media), then the offer rate (429), the number of sessions (503), the content type
(415), the offer itself (400: not SDP, no video, video not ``sendrecv``) and what it declares
against ``serve.max_*`` (422: ``a=framerate``, or ``?width=&height=&fps=`` in the URL).
The video transceiver is answered ``sendrecv``: the camera comes in and the swapped video goes
back on the same transceiver; its ICE candidates are on ``advanced.serve.ice_interfaces`` only
(:mod:`livecam.remote.ice`). **Audio is refused cleanly**: its transceiver is answered
``inactive`` (no audio flows either way). ``?identity=NAME`` picks the session's identity from
the server's library (404 for an unknown one).

Each session is a stream of the process's one pipeline (:meth:`StreamSet.add_stream` with a
:class:`~livecam.remote.media.SessionSource` and :class:`~livecam.remote.media.SessionSink`),
added once its first frame arrives and removed when the session ends: DELETE, the peer
connection failing or closing, or no frame for ``advanced.serve.first_frame_timeout_s``. Another
user's token on a session's Location is 404 (a session cannot see another's). A frame larger than
``serve.max_*_px`` ends the session (its log line and the status say why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import ssl
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from aiohttp import web

from livecam.config import Config
from livecam.control.api import parse_address
from livecam.control.http import LOOPBACK, HttpServer, Limits, bind_socket
from livecam.core.commands import SelectIdentity
from livecam.core.errors import ConfigError
from livecam.pipeline.streams import StreamSet
from livecam.remote.cors import cors, preflight
from livecam.remote.encoding import H264PacketEncoder, sent_codec
from livecam.remote.ice import allowed_addresses, check_interfaces, limit_gathering
from livecam.remote.media import SessionSink, SessionSource, make_swapped_track
from livecam.remote.metrics import SessionStats
from livecam.remote.photos import SessionPhotos, add_photo_route
from livecam.remote.session_api import add_routes, own_session, state_of
from livecam.remote.tokens import TokenStore

log = logging.getLogger(__name__)

_FRAMERATE = re.compile(r"^a=framerate:\s*([0-9.]+)", re.MULTILINE)
_MAX_OFFER_BYTES = 64 * 1024


@dataclass
class Session:
    """One WHIP session: its user, peer connection, frames and (once added) stream id."""

    id: str
    user: str
    pc: Any
    source: SessionSource
    sink: SessionSink
    stats: SessionStats
    stream: int | None = None
    ended: str | None = None
    codec: str = ""  # the video codec both ways, from the answer
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)


class WhipServer:
    """The WHIP endpoint for ``streams`` (a set held open), as a control source: ``start``
    binds ``advanced.serve.address`` (TLS from ``serve.tls_*``; plain HTTP only on loopback, else
    :class:`ConfigError`) and serves in a background thread; ``stop`` ends every session."""

    def __init__(self, config: Config, streams: StreamSet, tokens: TokenStore,
                 *, identities: tuple[str, ...] = (), limits: Limits | None = None,
                 photos: SessionPhotos | None = None) -> None:
        self._config = config
        self._serve = config.serve
        self._streams = streams
        self._tokens = tokens
        self._identities = identities
        self._photos = photos
        self._limits = limits or Limits()
        self._address = parse_address(config.serve.address)
        self._ssl = _tls_context(config)
        self._http: HttpServer | None = None
        self._sessions: dict[str, Session] = {}
        self._offer_times: list[float] = []

    @property
    def url(self) -> str:
        """``http(s)://host:port/whip`` actually bound."""
        host, port = self._address
        if self._http is not None:
            port = self._http.port
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}/whip"

    def sessions(self) -> dict[str, Session]:
        """The open sessions by id (a snapshot; the server's loop changes them)."""
        return dict(self._sessions)

    def start(self) -> None:
        if self._serve.ice_interfaces:
            log.info("ICE on %s only (advanced.serve.ice_interfaces)",
                     ", ".join(check_interfaces(self._serve.ice_interfaces)))
        if self._photos is not None:
            self._photos.sweep()  # what a crashed run left; before any session exists
        host, port = self._address
        try:
            sock = bind_socket(host, port, self._limits.backlog)
        except OSError as exc:
            raise ConfigError(f"livecam serve cannot listen on {host}:{port} "
                              f"({exc.strerror}): pick another with --set "
                              "advanced.serve.address=HOST:PORT") from None
        self._http = HttpServer(self._make_app, sock, self._limits, ssl_context=self._ssl,
                                name="livecam-whip")
        self._http.start()
        log.info("WHIP endpoint on %s (%d user(s))", self.url, len(self._tokens.names()))

    def stop(self) -> None:
        http = self._http
        if http is None:
            return
        loop = http.loop
        if loop is not None and loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._end_all(), loop).result(5.0)
        http.stop()
        if self._photos is not None:
            self._photos.forget_all()

    async def _end_all(self) -> None:
        await asyncio.gather(*(self._end(s, "the server stops")
                               for s in list(self._sessions.values())))

    # -- the application (the server's event-loop thread) -------------------------------

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_OFFER_BYTES, middlewares=[cors])
        app.router.add_post("/whip", self._offer)
        app.router.add_delete("/whip/{session}", self._delete)
        app.router.add_route("OPTIONS", "/whip", preflight)
        app.router.add_route("OPTIONS", "/whip/{session}", preflight)
        add_routes(app, self)  # the session's own status and commands
        if self._photos is not None:
            add_photo_route(app, self._photos, lambda r: own_session(self, r), self._uploaded)
        return app

    def names_for(self, session: Session) -> tuple[str, ...]:
        """The identities ``session`` may select: the server library's and its own uploads."""
        own = self._photos.names_of(session.id) if self._photos is not None else ()
        return (*self._identities, *own)

    async def _uploaded(self, session: Session, name: str) -> dict[str, Any]:
        """Make the uploaded identity ``name`` the session's (at its stream's next frame)."""
        session.tasks.add(asyncio.ensure_future(self._select(session, name)))
        return state_of(self, session)

    def stream_app(self, session: Session) -> Any:
        """The session's stream (an App), None before its first frame or after its end."""
        return None if session.stream is None else self._streams.targets().get(session.stream)

    def user_of(self, request: web.Request) -> str:
        """The user whose token ``request`` carries; 401 without a known one."""
        return self._user(request)

    def _user(self, request: web.Request) -> str:
        auth = request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        user = (self._tokens.user_of(token.strip())
                if scheme.lower() == "bearer" and token.strip() else None)
        if user is None:
            raise web.HTTPUnauthorized(
                text="a WHIP token is needed: Authorization: Bearer TOKEN (`livecam serve "
                "token add NAME` makes one)", headers={"WWW-Authenticate": "Bearer"})
        return user

    def _refuse(self, status: HTTPStatus, reason: str) -> web.HTTPException:
        log.info("WHIP offer refused (%d): %s", status, reason)
        cls = {HTTPStatus.BAD_REQUEST: web.HTTPBadRequest,
               HTTPStatus.NOT_FOUND: web.HTTPNotFound,
               HTTPStatus.UNSUPPORTED_MEDIA_TYPE: web.HTTPUnsupportedMediaType,
               HTTPStatus.UNPROCESSABLE_ENTITY: web.HTTPUnprocessableEntity,
               HTTPStatus.TOO_MANY_REQUESTS: web.HTTPTooManyRequests,
               HTTPStatus.SERVICE_UNAVAILABLE: web.HTTPServiceUnavailable}[status]
        return cls(text=reason)

    def _check_rate(self) -> None:
        now = time.monotonic()
        self._offer_times = [t for t in self._offer_times if now - t < 1.0]
        if len(self._offer_times) >= self._serve.max_offers_per_s:
            raise self._refuse(HTTPStatus.TOO_MANY_REQUESTS, "too many offers: at most "
                               f"{self._serve.max_offers_per_s:g} a second "
                               "(advanced.serve.max_offers_per_s)")
        self._offer_times.append(now)

    def _check_declared(self, request: web.Request, sdp: str) -> None:
        serve = self._serve
        declared: dict[str, float] = {}
        for key in ("width", "height", "fps"):
            text = request.query.get(key)
            if text is not None:
                try:
                    declared[key] = float(text)
                except ValueError:
                    raise self._refuse(HTTPStatus.BAD_REQUEST, f"?{key}= must be a number"
                                       ) from None
        rates = [float(m) for m in _FRAMERATE.findall(sdp)]
        if rates:
            declared["fps"] = max([*rates, declared.get("fps", 0.0)])
        limits = {"width": serve.max_width_px, "height": serve.max_height_px,
                  "fps": serve.max_fps}
        for key, value in declared.items():
            if value > limits[key]:
                raise self._refuse(HTTPStatus.UNPROCESSABLE_ENTITY, f"{key} {value:g} is over "
                                   f"this server's limit {limits[key]:g} "
                                   f"(advanced.serve.max_{'fps' if key == 'fps' else key + '_px'})")

    async def _offer(self, request: web.Request) -> web.Response:
        user = self._user(request)
        self._check_rate()
        open_sessions = [s for s in self._sessions.values() if s.ended is None]
        if len(open_sessions) >= self._serve.max_sessions:
            raise self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, f"this server holds "
                               f"{self._serve.max_sessions} sessions at most "
                               "(advanced.serve.max_sessions), all taken: try again later")
        if request.content_type != "application/sdp":
            raise self._refuse(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "the offer must be sent as "
                               "Content-Type: application/sdp")
        identity = request.query.get("identity")
        if identity is not None and identity not in self._identities:
            raise self._refuse(HTTPStatus.NOT_FOUND, f"no identity {identity!r} on this "
                               "server")
        try:
            sdp = (await request.read()).decode("utf-8")
        except (UnicodeDecodeError, web.HTTPRequestEntityTooLarge):
            raise self._refuse(HTTPStatus.BAD_REQUEST, "the offer is not UTF-8 SDP of at "
                               "most 64 KiB") from None
        self._check_declared(request, sdp)
        session = await self._answer(user, sdp)
        if identity is not None:
            session.tasks.add(asyncio.ensure_future(self._select(session, identity)))
        assert session.pc.localDescription is not None
        return web.Response(status=HTTPStatus.CREATED, text=session.pc.localDescription.sdp,
                            content_type="application/sdp",
                            headers={"Location": f"/whip/{session.id}",
                                     "Cache-Control": "no-store"})

    async def _answer(self, user: str, sdp: str) -> Session:
        from aiortc import RTCPeerConnection, RTCSessionDescription

        from livecam.remote.jitter import complete_frames_at_marker

        loop = asyncio.get_running_loop()
        serve = self._serve
        pc = RTCPeerConnection()
        session = Session(id=secrets.token_urlsafe(16), user=user, pc=pc,
                          source=SessionSource(fps=serve.max_fps,
                                               first_frame_timeout_s=serve.first_frame_timeout_s),
                          sink=SessionSink(loop), stats=SessionStats())

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "video":
                session.tasks.add(asyncio.ensure_future(self._pump(session, track)))

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                await self._end(session, f"connection {pc.connectionState}")

        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        except Exception as exc:  # aiortc raises ValueError and others for bad SDP
            await pc.close()
            raise self._refuse(HTTPStatus.BAD_REQUEST, f"the offer is not usable SDP "
                               f"({type(exc).__name__}: {exc})") from None
        videos = [t for t in pc.getTransceivers() if t.kind == "video"]
        # the direction the offer asked for (aiortc keeps it apart from the answer's own)
        if len(videos) != 1 or getattr(videos[0], "_offerDirection", None) != "sendrecv":
            await pc.close()
            raise self._refuse(HTTPStatus.BAD_REQUEST, "the offer needs exactly one video "
                               "transceiver, sendrecv (the camera in, the swapped video back)")
        for t in pc.getTransceivers():
            if t.kind == "audio":
                t.direction = "inactive"  # refused cleanly: no audio either way
        if serve.ice_interfaces:
            addresses = allowed_addresses(serve.ice_interfaces)
            if not addresses:
                await pc.close()
                raise self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, "no address of "
                                   "advanced.serve.ice_interfaces is up on this server now: "
                                   "try again later")
            limit_gathering(pc, addresses)
        complete_frames_at_marker(pc)  # the camera's frames one frame sooner
        track = make_swapped_track(session.sink)
        pc.addTrack(track)  # the video transceiver's sender
        answer = await pc.createAnswer()
        session.codec = sent_codec(answer.sdp)
        if session.codec == "H264":  # x264 ultrafast here, not aiortc's x264 medium
            track.encoder = H264PacketEncoder(fps=serve.max_fps)
        await pc.setLocalDescription(answer)
        self._sessions[session.id] = session
        session.tasks.add(asyncio.ensure_future(self._add_stream(session)))
        session.tasks.add(asyncio.ensure_future(session.stats.poll(pc)))
        log.info("WHIP session %s for %s: answered (%s)", session.id[:8], user, session.codec)
        return session

    async def _pump(self, session: Session, track: Any) -> None:
        """The camera into the session's source, newest frame only; ends the session when
        frames stop for ``first_frame_timeout_s`` or come larger than the limits."""
        from aiortc.mediastreams import MediaStreamError

        serve = self._serve
        while session.ended is None:
            try:
                frame = await asyncio.wait_for(track.recv(), serve.first_frame_timeout_s)
            except (MediaStreamError, TimeoutError):
                await self._end(session, "the camera stopped sending")
                return
            if frame.width > serve.max_width_px or frame.height > serve.max_height_px:
                await self._end(session, f"the camera sent {frame.width}x{frame.height}, over "
                                "advanced.serve.max_width_px x max_height_px "
                                f"({serve.max_width_px}x{serve.max_height_px})")
                return
            session.stats.frame_in()
            session.source.push(frame)  # converted to BGR if and when the stream takes it

    async def _add_stream(self, session: Session) -> None:
        label = f"webrtc:{session.user}/{session.id[:8]}"
        try:
            k = await asyncio.to_thread(self._streams.add_stream, label, "webrtc",
                                        endpoints=(session.source, session.sink))
        except Exception as exc:  # the stream did not start: the session ends with the reason
            await self._end(session, f"its stream did not start: {exc}")
            return
        session.stream = k
        self._streams.targets()[k].metrics.registry.register(session.stats.collector(session))
        if session.ended is not None:  # ended while the stream opened
            await asyncio.to_thread(self._remove, k)

    async def _select(self, session: Session, identity: str) -> None:
        while session.stream is None and session.ended is None:
            await asyncio.sleep(0.05)
        app = self._streams.targets().get(session.stream) if session.stream is not None else None
        if app is not None:
            app.commands.put(SelectIdentity(identity), timeout_s=0)

    def _remove(self, k: int) -> None:
        with contextlib.suppress(KeyError):
            self._streams.remove_stream(k)

    async def _end(self, session: Session, why: str) -> None:
        if session.ended is not None:
            return
        session.ended = why
        log.info("WHIP session %s for %s ended: %s", session.id[:8], session.user, why)
        session.source.end()
        current = asyncio.current_task()
        for task in session.tasks:
            if task is not current:
                task.cancel()
        if session.stream is not None:
            await asyncio.to_thread(self._remove, session.stream)
        session.sink.close()
        await session.pc.close()
        self._sessions.pop(session.id, None)
        if self._photos is not None:
            self._photos.forget(session.id)

    async def _delete(self, request: web.Request) -> web.Response:
        user = self._user(request)
        session = self._sessions.get(request.match_info["session"])
        if session is None or session.user != user:  # another's is as unknown as none
            raise web.HTTPNotFound(text="no such session")
        await self._end(session, "the client ended it (DELETE)")
        return web.Response(status=HTTPStatus.OK)


def _tls_context(config: Config) -> ssl.SSLContext | None:
    """The TLS context from ``advanced.serve.tls_cert``/``tls_key``; None for plain HTTP, which only
    a loopback address may use (:class:`ConfigError` otherwise, or for unreadable files)."""
    serve = config.serve
    host, _ = parse_address(serve.address)
    if not serve.tls_cert and not serve.tls_key:
        if host not in LOOPBACK:
            raise ConfigError(f"advanced.serve.address {serve.address} is reachable from other "
                              "machines: set advanced.serve.tls_cert and advanced.serve.tls_key "
                              "(plain HTTP only on 127.0.0.1/::1)")
        return None
    if not (serve.tls_cert and serve.tls_key):
        raise ConfigError("set both advanced.serve.tls_cert and advanced.serve.tls_key (or "
                          "neither, on loopback)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(Path(serve.tls_cert).expanduser(),
                                Path(serve.tls_key).expanduser())
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"advanced.serve.tls_cert/tls_key cannot be loaded ({exc}): give a PEM "
                          "certificate and its key") from None
    return context

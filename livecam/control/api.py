"""The control API: HTTP endpoints for `livecam ctl`, the panel and Prometheus.

Every request, the panel page included, must carry a ``Host`` header naming this server (the
listen address or ``localhost``: a web page that rebinds its own domain name to 127.0.0.1 is
refused) and the token: shown as ``Authorization: Bearer TOKEN`` or ``?token=TOKEN`` (browsers
cannot set headers on an OBS dock URL, an ``<img>`` or an ``EventSource``), or proven by a
signed request, ``Authorization: Livecam-HMAC S M`` (what ``livecam ctl`` sends, so that it
never hands the token to a program that took the port: :mod:`livecam.control.handshake`). The
checks run in that order (:mod:`livecam.control.gate`): 421 for a foreign Host, 401 without
the token; a token shown is checked before any body is read. Endpoints::

    GET  /api/challenge?nonce=C     {"proof", "nonce"}: the server proves it holds the token
                                    (needs no token)
    GET  /  or /panel               the control panel (HTML)
    GET  /api/status                status document (JSON)
    GET  /api/events                server-sent events: one ``status`` event per push
    GET  /api/identities            [{"index", "name", "thumbnail"}]
    GET  /api/identities/NAME/thumbnail.jpg
    GET  /api/preview.jpg           the last output frame, small JPEG
    GET  /metrics                   Prometheus exposition (counters, histograms, state)
    POST /api/select {"name": N|null} | {"index": I}   /api/next   /api/prev
    POST /api/bypass {"on": true|false} (no body = toggle)
    POST /api/assign {"track_id": T, "name": N|null}
    POST /api/delay {"ms": MS}      A/V delay, 0-2000 ms
    POST /api/reload   /api/snapshot   /api/quit

Several streams in one process (``livecam run`` with several ``--input``/``--output`` pairs):
every endpoint takes ``?stream=K`` (0-based) to act on or report one stream; without it, a
command goes to every stream, ``/api/status`` and ``/api/events`` report stream 0 with a
``streams`` list of every stream's summary, ``/api/preview.jpg`` shows stream 0, and
``/metrics`` labels every sample with its ``stream`` (one stream: no label). An unknown stream
is 400. ``K`` is the stream's id: the start's pairs are 0, 1, ...; streams added while livecam
runs (``/api/streams``, :mod:`livecam.control.stream_api`) get the next ids, never reused.

Bodies are empty or a JSON object with exactly the fields above (see
:mod:`livecam.control.requests`); anything else is 400. Every error is JSON
``{"error": "..."}``: 400 bad body, 401 token, 404 unknown endpoint or identity, 405 wrong
method, 408 body too slow, 413 body over 64 KiB, 421 foreign Host, 500 a snapshot that could
not be saved (the error says why), 503 busy. Malformed HTTP
that never becomes a request is 400 from the HTTP layer itself (plain text). Command endpoints
answer once the pipeline has applied the command (or after ``advanced.control.apply_wait_s``, 2 s
by default) with ``{"applied",
"frames_sent_at_apply", "first_frame_index", "state", "delay_ms"}`` (see
:mod:`livecam.control.apply` and :class:`~livecam.core.commands.Ticket`: the first captured
frame processed under the new state; -1 while not applied); a reload waits for the reload
(at most 5 s more) and adds ``reload``: ``{"status": "reloaded"|"failed"|"reloading",
"message"}`` (a config file that does not load is "failed", still 200); a snapshot adds
``path`` and ``paths`` (one file per stream it went to, named ``...-streamK.png`` where a
process runs several). Tokens are never logged (paths are, queries are not).
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from livecam.config.control import ControlConfig
from livecam.control.apply import run_command
from livecam.control.auth import load_or_create_token
from livecam.control.catalog import IdentityCatalog
from livecam.control.gate import Gate, Handler, json_error
from livecam.control.handshake import CHALLENGE_PATH
from livecam.control.http import LOOPBACK, HostCheck, HttpServer, Limits, bind_socket
from livecam.control.ratelog import RateLimitedLog, printable
from livecam.control.requests import VERBS, RequestError
from livecam.control.status import ControlTarget, StatusReporter
from livecam.control.stream_api import (
    FixedStreams,
    StreamRegistry,
    StreamViews,
    add_stream,
    remove_stream,
)
from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

#: Open ``/api/events`` streams at most (a panel holds one); more get 503.
_MAX_EVENT_STREAMS = 8
#: A stream whose client stops reading for this long is closed.
_WRITE_TIMEOUT_S = 10.0


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port); :class:`ConfigError` if bad."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"control.api_address {text!r}: expected HOST:PORT, e.g. "
                          "127.0.0.1:8765")
    return host, int(port_text)


class _StreamLabels(Collector):
    """Every stream's metrics in one exposition, each sample labelled with its stream."""

    def __init__(self, registries: Callable[[], Mapping[int, CollectorRegistry]]) -> None:
        self._registries = registries

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for k, registry in self._registries().items():
            for family in registry.collect():
                out = merged.get(family.name)
                if out is None:
                    out = merged[family.name] = Metric(family.name, family.documentation,
                                                       family.type, family.unit)
                out.samples.extend(s._replace(labels={**s.labels, "stream": str(k)})
                                   for s in family.samples)
        yield from merged.values()


class ControlServer:
    """Serves the API for ``targets`` (one per stream) or for ``streams`` (streams that
    come and go, :class:`~livecam.control.stream_api.StreamRegistry`) on
    ``config.api_address`` in a background thread.

    ``start`` reads or creates the token in ``token_file`` and binds (raising
    :class:`ConfigError` when the address is taken) and returns; ``stop`` returns within
    about 0.3 s and ends open event streams. ``/api/snapshot`` writes into ``snapshot_dir``
    (clients cannot choose the path). Unless ``required``, a taken address only logs a
    warning and the run goes on without the API (``livecam run``; the daemon requires it).
    Handlers run on the server's event-loop thread; anything slow (JPEG encoding, reading
    thumbnails) runs in the loop's worker threads.
    """

    def __init__(self, *, targets: Sequence[ControlTarget] | None = None,
                 streams: StreamRegistry | None = None, catalog: IdentityCatalog,
                 token_file: Path, config: ControlConfig, snapshot_dir: Path,
                 required: bool = True, limits: Limits | None = None) -> None:
        if (targets is None) == (streams is None):
            raise ValueError("give the control API either targets or streams")
        if targets is not None and not targets:
            raise ValueError("the control API needs at least one stream to serve")
        self._required = required
        self._registry: StreamRegistry = streams or FixedStreams(list(targets or ()))
        self._catalog = catalog
        self._token_file = token_file
        self._address = parse_address(config.api_address)
        self._config = config
        self._limits = limits or Limits()
        self._snapshot_dir = snapshot_dir
        self._views = StreamViews(self._registry, {"preview_fps": config.preview_fps})
        self._merged = CollectorRegistry(auto_describe=False)
        self._merged.register(_StreamLabels(
            lambda: {k: t.metrics.registry for k, t in self._sync().items()}))
        self._gate = Gate(HostCheck(self._address[0]), self._limits)
        # a request that makes a handler fail is a bug, but any client can repeat it
        self._failures = RateLimitedLog(log, "control API requests that failed (a bug; "
                                        "answered 500)", level=logging.ERROR)
        self._http: HttpServer | None = None
        self._streams = 0
        # per stream: (frames_sent, JPEG) last encoded
        self._preview: dict[int, tuple[int, bytes]] = {}

    @property
    def url(self) -> str:
        """``http://host:port`` actually bound (the port is known after ``start``)."""
        host, port = self._address
        if self._http is not None:
            port = self._http.port
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    @property
    def reporter(self) -> StatusReporter:
        """The first running stream's status reporter."""
        return next(iter(self._views.reporters().values()))

    def _sync(self) -> Mapping[int, ControlTarget]:
        return self._views.sync()

    def _first(self, targets: Mapping[int, ControlTarget]) -> ControlTarget:
        if not targets:
            raise RequestError(HTTPStatus.CONFLICT, "no stream is running: add one first")
        return next(iter(targets.values()))

    def _identity_names(self) -> tuple[str, ...]:
        targets = self._registry.targets()
        if targets:
            return tuple(next(iter(targets.values())).state.identities)
        return tuple(self._catalog.names())

    def start(self) -> None:
        """Read (or create) the token file, bind and serve in a background thread."""
        self._gate.token = load_or_create_token(self._token_file)
        host, port = self._address
        if host not in LOOPBACK:
            log.warning("control API listens on %s, reachable from other machines; anyone "
                        "with the token can control livecam", host)
        try:
            sock = bind_socket(host, port, self._limits.backlog)
        except OSError as exc:
            message = (f"control API cannot listen on {host}:{port} ({exc.strerror}): another "
                       "livecam may be running; pick another port with --set "
                       "control.api_address=127.0.0.1:PORT")
            if self._required:
                raise ConfigError(message) from None
            log.warning("%s; running without the control API", message)
            return
        self._views.register(True)
        self._http = HttpServer(self._make_app, sock, self._limits)
        self._http.start()
        log.info("control API on %s (panel: %s/panel?token=... ; `livecam ctl panel-url` "
                 "prints the full URL)", self.url, self.url)

    def stop(self) -> None:
        """Stop serving and end event streams. Idempotent; any thread except a handler's."""
        if self._http is not None:
            self._http.stop()
            self._gate.refusals.flush()
            self._failures.flush()
            self._views.register(False)

    # -- the application (everything below runs on the server's event-loop thread) -------

    def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors, self._gate.middleware],
                              client_max_size=self._limits.max_body_bytes,
                              handler_args={"max_field_size": 8190, "max_line_size": 8190})
        get = [("/", self._panel), ("/panel", self._panel), ("/api/status", self._status),
               ("/api/events", self._events), ("/api/identities", self._identities),
               ("/api/identities/{name}/thumbnail.jpg", self._thumbnail),
               ("/api/preview.jpg", self._preview_jpeg), ("/metrics", self._metrics)]
        get.append((CHALLENGE_PATH, self._gate.challenge))
        for path, handler in get:
            app.router.add_get(path, handler)
        for verb in VERBS:
            app.router.add_post(f"/api/{verb}", self._command)
        app.router.add_get("/api/streams", self._list_streams)
        app.router.add_post("/api/streams", self._add_stream)
        app.router.add_delete("/api/streams/{stream}", self._remove_stream)
        return app

    async def _list_streams(self, request: web.Request) -> web.Response:
        reporters = self._views.reporters().values()
        return _json({"streams": [_brief(r.status()) for r in reporters]})

    async def _add_stream(self, request: web.Request) -> web.Response:
        return await add_stream(request, self._registry, self._limits)

    async def _remove_stream(self, request: web.Request) -> web.Response:
        return await remove_stream(request, self._registry)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every error as JSON; one DEBUG line per request (the path, never the query)."""
        try:
            response = await handler(request)
        except RequestError as exc:
            # the body may be unread (413, 401): close rather than parse what follows
            response = json_error(exc.status, str(exc), close=exc.status != HTTPStatus.NOT_FOUND)
        except web.HTTPException as exc:  # the router's 404 and 405, aiohttp's 413
            headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
            response = json_error(HTTPStatus(exc.status), exc.reason, headers=headers)
        except Exception as exc:  # a bug: answer 500, keep serving
            self._failures.event(f"{request.method} {printable(request.path)}: "
                                 f"{type(exc).__name__}: {printable(str(exc))}")
            log.debug("control API: %s %s failed", request.method, printable(request.path),
                      exc_info=True)
            response = json_error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error (see the log)")
        log.debug("%s %s -> %d", request.method, printable(request.path), response.status)
        return response

    async def _panel(self, request: web.Request) -> web.Response:
        html = importlib.resources.files("livecam.control").joinpath("panel.html").read_bytes()
        return web.Response(body=html, content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store"})

    def _stream(self, request: web.Request) -> int | None:
        """The ``?stream=K`` of the request (None: not given); 400 for one not running."""
        text = request.query.get("stream")
        if text is None:
            return None
        ids = list(self._sync())
        # ASCII digits only: str.isdigit() is also true of "²", which int() refuses
        if not (text.isascii() and text.isdigit()) or int(text) not in ids:
            n = len(ids)
            if ids == list(range(n)):
                raise RequestError(HTTPStatus.BAD_REQUEST, f"stream must be a whole number "
                                   f"from 0 to {n - 1} (this livecam runs {n} stream(s))")
            raise RequestError(HTTPStatus.BAD_REQUEST, f"no stream {text}: the running "
                               f"streams are {', '.join(map(str, ids)) or 'none'}")
        return int(text)

    def _status_doc(self, stream: int | None) -> dict[str, Any]:
        """One stream's document (the first running one when None), with every stream's
        summary."""
        reporters = self._views.reporters()
        if not reporters:
            return {"streams": [], "identities": list(self._identity_names())}
        docs = {k: r.status() for k, r in reporters.items()}
        doc = dict(docs[stream] if stream in docs else next(iter(docs.values())))
        doc["streams"] = [_brief(d) for d in docs.values()]
        return doc

    def _generation(self, stream: int | None) -> tuple[int, ...]:
        targets = self._registry.targets()
        chosen = list(targets.values()) if stream is None else (
            [targets[stream]] if stream in targets else [])
        return tuple(t.state.generation for t in chosen)

    async def _status(self, request: web.Request) -> web.Response:
        return _json(self._status_doc(self._stream(request)))

    async def _metrics(self, request: web.Request) -> web.Response:
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        stream = self._stream(request)
        targets = self._sync()
        if stream is None and list(targets) != [0]:
            body = encode(self._merged)  # every stream's samples, labelled with its id
        else:
            body = encode(targets[stream or 0].metrics.registry)
        return web.Response(body=body, headers={"Content-Type": content_type,
                                                "Cache-Control": "no-store"})

    async def _identities(self, request: web.Request) -> web.Response:
        names = self._identity_names()
        return _json([{"index": i, "name": n, "thumbnail": f"/api/identities/{n}/thumbnail.jpg"}
                      for i, n in enumerate(names)])

    async def _thumbnail(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self._identity_names():
            raise RequestError(HTTPStatus.NOT_FOUND, f"no identity {name!r}")
        data = await asyncio.to_thread(self._catalog.thumbnail_jpeg, name)
        if data is None:
            raise RequestError(HTTPStatus.NOT_FOUND, f"identity {name!r} has no thumbnail")
        return _jpeg(data)

    async def _preview_jpeg(self, request: web.Request) -> web.Response:
        stream = self._stream(request)
        targets = self._sync()
        target = targets[stream] if stream is not None else self._first(targets)
        stream = next(k for k, t in targets.items() if t is target)
        last = target.live.last()
        if last is None or self._config.preview_width_px == 0:
            raise RequestError(HTTPStatus.SERVICE_UNAVAILABLE, "no frame sent yet")
        cached = self._preview.get(stream)
        if cached is None or cached[0] != last.frames_sent:
            # encoded once per frame however many panels ask, off the event loop
            cached = (last.frames_sent, await asyncio.to_thread(
                _encode_preview, last.image_bgr, self._config.preview_width_px))
            self._preview[stream] = cached
        return _jpeg(cached[1])

    async def _events(self, request: web.Request) -> web.StreamResponse:
        if self._streams >= _MAX_EVENT_STREAMS:
            raise RequestError(HTTPStatus.SERVICE_UNAVAILABLE, f"at most {_MAX_EVENT_STREAMS} "
                               "event streams at once")
        stream = self._stream(request)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-store"})
        response.force_close()
        self._streams += 1
        try:
            await response.prepare(request)
            await self._stream_status(response, stream)
        except (ConnectionError, TimeoutError):
            pass  # the client went away or stopped reading
        finally:
            self._streams -= 1
        return response

    async def _stream_status(self, response: web.StreamResponse, stream: int | None) -> None:
        interval_s = self._config.status_push_interval_s
        loop = asyncio.get_running_loop()
        last_push = 0.0
        last_generation: tuple[int, ...] = ()
        http = self._http
        while http is not None and not http.stopping:
            generation = self._generation(stream)
            now = loop.time()
            if generation != last_generation or now - last_push >= interval_s:
                data = json.dumps(self._status_doc(stream))
                async with asyncio.timeout(_WRITE_TIMEOUT_S):
                    await response.write(f"event: status\ndata: {data}\n\n".encode())
                last_push, last_generation = now, generation
            await asyncio.sleep(0.05)

    async def _command(self, request: web.Request) -> web.Response:
        return _json(await run_command(request, targets=self._sync(),
                                       stream=self._stream(request), limits=self._limits,
                                       snapshot_dir=self._snapshot_dir,
                                       apply_wait_s=self._config.apply_wait_s))


def _brief(doc: dict[str, Any]) -> dict[str, Any]:
    """One line of the ``streams`` list: what the panel shows per stream."""
    return {"stream": doc.get("stream", 0), "input": doc.get("input"),
            "output": doc.get("output"), "fps_in": doc.get("fps_in"),
            "fps_out": doc.get("fps_out"), "latency_ms": doc.get("latency_ms"),
            "overloaded": doc.get("overload", {}).get("active", False),
            "stopped": doc.get("stopped", False),
            "active_identity": doc.get("active_identity"), "bypass": doc.get("bypass"),
            "tracks": len(doc.get("tracks", ())), "in_flight": doc.get("in_flight", 0)}


def _json(value: Any) -> web.Response:
    return web.json_response(value, headers={"Cache-Control": "no-store"})


def _jpeg(data: bytes) -> web.Response:
    return web.Response(body=data, content_type="image/jpeg",
                        headers={"Cache-Control": "no-store"})


def _encode_preview(image: Any, width: int) -> bytes:
    """``image`` (H, W, 3) uint8 BGR scaled down to ``width`` px (never up), as JPEG."""
    import cv2

    h, w = image.shape[:2]
    if w > width:
        image = cv2.resize(image, (width, max(1, round(h * width / w))),
                           interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 70])
    if not ok:
        raise RequestError(HTTPStatus.INTERNAL_SERVER_ERROR, "JPEG encoding failed")
    return bytes(buf.tobytes())

"""The control API: a small HTTP server (stdlib) for `livecam ctl`, the panel and Prometheus.

Every request, the panel page included, must carry the token: ``Authorization: Bearer TOKEN``
or ``?token=TOKEN`` (browsers cannot set headers on an OBS dock URL, an ``<img>`` or an
``EventSource``). Anything else gets 401 and changes nothing. Endpoints::

    GET  /  or /panel               the control panel (HTML)
    GET  /api/status                status document (JSON)
    GET  /api/events                server-sent events: one ``status`` event per push
    GET  /api/identities            [{"index", "name", "thumbnail"}]
    GET  /api/identities/NAME/thumbnail.jpg
    GET  /api/preview.jpg           the last output frame, small JPEG
    GET  /metrics                   Prometheus text exposition
    POST /api/select {"name": N} | {"index": I}   /api/next   /api/prev
    POST /api/bypass {"on": true|false} (no body = toggle)
    POST /api/assign {"track_id": T, "name": N|null}
    POST /api/reload   /api/snapshot   /api/quit

Command endpoints answer once the pipeline has applied the command (or after 2 s) with
``{"applied", "frames_sent_at_apply", "state"}``.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from livecam.config.control import ControlConfig
from livecam.control.auth import load_or_create_token, token_matches
from livecam.control.catalog import IdentityCatalog
from livecam.control.paths import new_snapshot_path
from livecam.control.status import ControlTarget, StatusReporter, prometheus_text
from livecam.core import commands as cmd
from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

_MAX_BODY_BYTES = 64 * 1024
_APPLY_TIMEOUT_S = 2.0
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port); :class:`ConfigError` if bad."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"control.api_address {text!r}: expected HOST:PORT, e.g. "
                          "127.0.0.1:8765")
    return host, int(port_text)


class _Server4(ThreadingHTTPServer):
    daemon_threads = True  # open event streams must not keep the process alive


class _Server6(_Server4):
    address_family = socket.AF_INET6


class _RequestError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def state_dict(state: Any) -> dict[str, Any]:
    return {"active_identity": state.active_identity, "bypass": state.bypass,
            "identities": list(state.identities), "generation": state.generation,
            "assignments": [{"track_id": t, "identity": n} for t, n in state.track_identities]}


class ControlServer:
    """Serves the API for ``target`` on ``config.api_address`` in a background thread.

    ``start`` reads or creates the token in ``token_file`` and binds (raising
    :class:`ConfigError` when the address is taken) and returns; ``stop`` returns within
    about 0.2 s and ends open event streams. ``/api/snapshot`` writes into ``snapshot_dir``
    (clients cannot choose the path). Unless ``required``, a taken address only logs a
    warning and the run goes on without the API (``livecam run``; the daemon requires it).
    """

    def __init__(self, *, target: ControlTarget, catalog: IdentityCatalog, token_file: Path,
                 config: ControlConfig, snapshot_dir: Path, required: bool = True) -> None:
        self._required = required
        self._target = target
        self._catalog = catalog
        self._token_file = token_file
        self._token = ""
        self._address = parse_address(config.api_address)
        self._config = config
        self._snapshot_dir = snapshot_dir
        self._reporter = StatusReporter(target, extra={"preview_fps": config.preview_fps})
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` actually bound (the port is known after ``start``)."""
        host, port = self._address
        if self._httpd is not None:
            port = int(self._httpd.server_address[1])
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    @property
    def reporter(self) -> StatusReporter:
        return self._reporter

    def start(self) -> None:
        """Read (or create) the token file, bind and serve in a background thread."""
        self._token = load_or_create_token(self._token_file)
        host, port = self._address
        if host not in _LOOPBACK:
            log.warning("control API listens on %s, reachable from other machines; anyone "
                        "with the token can control livecam", host)
        handler = _make_handler(self)
        server_cls = _Server6 if ":" in host else _Server4
        try:
            self._httpd = server_cls((host, port), handler)
        except OSError as exc:
            message = (f"control API cannot listen on {host}:{port} ({exc.strerror}): another "
                       "livecam may be running; pick another port with --set "
                       "control.api_address=127.0.0.1:PORT")
            if self._required:
                raise ConfigError(message) from None
            log.warning("%s; running without the control API", message)
            return
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="livecam-control-api", daemon=True)
        self._thread.start()
        log.info("control API on %s (panel: %s/panel?token=... ; `livecam ctl panel-url` "
                 "prints the full URL)", self.url, self.url)

    def stop(self) -> None:
        """Stop serving and end event streams. Idempotent; any thread except a handler's."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # -- request handling (handler threads) ----------------------------------------------

    def authorised(self, headers: Any, query: dict[str, list[str]]) -> bool:
        auth = headers.get("Authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if given is None:
            tokens = query.get("token")
            given = tokens[0] if tokens else None
        return token_matches(self._token, given)

    def get(self, path: str) -> tuple[str, bytes]:
        """(content type, body) for a GET of ``path`` (not the event stream)."""
        if path in ("/", "/panel"):
            return "text/html; charset=utf-8", _panel_html()
        if path == "/api/status":
            return _json(self._reporter.status())
        if path == "/metrics":
            text = prometheus_text(self._reporter.status())
            return "text/plain; version=0.0.4; charset=utf-8", text.encode()
        if path == "/api/identities":
            names = self._target.state.identities
            return _json([{"index": i, "name": n,
                           "thumbnail": f"/api/identities/{n}/thumbnail.jpg"}
                          for i, n in enumerate(names)])
        if path.startswith("/api/identities/") and path.endswith("/thumbnail.jpg"):
            name = unquote(path[len("/api/identities/"):-len("/thumbnail.jpg")])
            if name not in self._target.state.identities:
                raise _RequestError(HTTPStatus.NOT_FOUND, f"no identity {name!r}")
            data = self._catalog.thumbnail_jpeg(name)
            if data is None:
                raise _RequestError(HTTPStatus.NOT_FOUND, f"identity {name!r} has no thumbnail")
            return "image/jpeg", data
        if path == "/api/preview.jpg":
            return "image/jpeg", self._preview_jpeg()
        raise _RequestError(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {path}")

    def _preview_jpeg(self) -> bytes:
        import cv2

        last = self._target.live.last()
        width = self._config.preview_width_px
        if last is None or width == 0:
            raise _RequestError(HTTPStatus.SERVICE_UNAVAILABLE, "no frame sent yet")
        image: Any = last.image_bgr
        h, w = image.shape[:2]
        if w > width:
            image = cv2.resize(image, (width, max(1, round(h * width / w))),
                               interpolation=cv2.INTER_AREA)
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 70])
        if not ok:
            raise _RequestError(HTTPStatus.INTERNAL_SERVER_ERROR, "JPEG encoding failed")
        return bytes(buf.tobytes())

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        command = self._command_for(path, body)
        ticket = self._target.commands.put(command)
        applied = ticket.wait(_APPLY_TIMEOUT_S)
        state = ticket.state if applied and ticket.state is not None else self._target.state
        reply: dict[str, Any] = {"applied": applied, "frames_sent_at_apply": ticket.frames_sent,
                                 "state": state_dict(state)}
        if isinstance(command, cmd.SaveSnapshot):
            reply["path"] = command.path
        return reply

    def _command_for(self, path: str, body: dict[str, Any]) -> cmd.Command:
        names = self._target.state.identities
        if path == "/api/select":
            if "index" in body:
                index = body["index"]
                if not isinstance(index, int) or not 0 <= index < len(names):
                    raise _RequestError(HTTPStatus.NOT_FOUND, f"no identity at index {index!r} "
                                        f"({len(names)} identities)")
                return cmd.SelectIdentityIndex(index)
            name = body.get("name")
            if name is not None and name not in names:
                known = ", ".join(names) or "none"
                raise _RequestError(HTTPStatus.NOT_FOUND, f"no identity {name!r} (known: "
                                    f"{known}); add it with `livecam identity add` and reload")
            return cmd.SelectIdentity(name)
        if path in ("/api/next", "/api/prev"):
            return cmd.StepIdentity(+1 if path == "/api/next" else -1)
        if path == "/api/bypass":
            if "on" not in body:
                return cmd.ToggleBypass()
            if not isinstance(body["on"], bool):
                raise _RequestError(HTTPStatus.BAD_REQUEST, '"on" must be true or false')
            return cmd.SetBypass(body["on"])
        if path == "/api/assign":
            track_id, name = body.get("track_id"), body.get("name")
            if not isinstance(track_id, int) or isinstance(track_id, bool) or track_id < 0:
                raise _RequestError(HTTPStatus.BAD_REQUEST, '"track_id" must be a track number '
                                    "(see `livecam ctl status`)")
            if name is not None and name not in names:
                raise _RequestError(HTTPStatus.NOT_FOUND, f"no identity {name!r}")
            return cmd.AssignTrack(track_id, name)
        if path == "/api/reload":
            return cmd.Reload()
        if path == "/api/snapshot":
            return cmd.SaveSnapshot(str(new_snapshot_path(self._snapshot_dir)))
        if path == "/api/quit":
            return cmd.Quit()
        raise _RequestError(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {path}")

    def stream_events(self, write: Callable[[bytes], None]) -> None:
        """Write ``status`` events until the server stops or the client goes away."""
        interval_s = self._config.status_push_interval_s
        last_push = 0.0
        last_generation = -1
        while not self._stop.is_set():
            generation = self._target.state.generation
            now = time.monotonic()
            if generation != last_generation or now - last_push >= interval_s:
                data = json.dumps(self._reporter.status())
                write(f"event: status\ndata: {data}\n\n".encode())
                last_push, last_generation = now, generation
            self._stop.wait(0.05)


def _json(value: Any) -> tuple[str, bytes]:
    return "application/json", json.dumps(value).encode()


def _panel_html() -> bytes:
    return importlib.resources.files("livecam.control").joinpath("panel.html").read_bytes()


def _make_handler(server: ControlServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "livecam"

        def log_message(self, format: str, *args: Any) -> None:  # base class's signature
            log.debug("%s %s", self.address_string(), format % args)

        def _send(self, status: HTTPStatus, content_type: str, body: bytes,
                  extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: HTTPStatus, message: str) -> None:
            extra = {"WWW-Authenticate": 'Bearer realm="livecam"'} \
                if status == HTTPStatus.UNAUTHORIZED else None
            self._send(status, "application/json", json.dumps({"error": message}).encode(),
                       extra)

        def _authorised(self) -> tuple[str, bool]:
            parts = urlsplit(self.path)
            ok = server.authorised(self.headers, parse_qs(parts.query))
            if not ok:
                self._error(HTTPStatus.UNAUTHORIZED, "missing or wrong token: use `livecam "
                            "ctl` or `livecam ctl panel-url`, which read the token file")
            return parts.path, ok

        def do_GET(self) -> None:
            path, ok = self._authorised()
            if not ok:
                return
            if path == "/api/events":
                self._events()
                return
            try:
                content_type, body = server.get(path)
            except _RequestError as exc:
                self._error(exc.status, str(exc))
                return
            self._send(HTTPStatus.OK, content_type, body)

        def _events(self) -> None:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def write(data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()

            try:
                server.stream_events(write)
            except (BrokenPipeError, ConnectionResetError):
                return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY_BYTES:
                self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
                self.close_connection = True
                return
            raw = self.rfile.read(length) if length else b""
            path, ok = self._authorised()
            if not ok:
                return
            try:
                body = json.loads(raw) if raw.strip() else {}
                if not isinstance(body, dict):
                    raise _RequestError(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
                reply = server.post(path, body)
            except json.JSONDecodeError:
                self._error(HTTPStatus.BAD_REQUEST, "body is not valid JSON")
                return
            except _RequestError as exc:
                self._error(exc.status, str(exc))
                return
            self._send(HTTPStatus.OK, "application/json", json.dumps(reply).encode())

    return Handler

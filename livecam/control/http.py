"""The control API's HTTP server: aiohttp on its own thread and event loop, with limits.

The API shares its process with the 30 fps frame threads, so whatever a client does (a flood
of requests, thousands of idle sockets, a huge or endless body) must cost the frame threads
little. Measured against those attacks (docs/control.md), aiohttp was chosen over the stdlib
server (a thread per connection, no timeouts) and over uvicorn + Starlette (which keeps a
connection that never sends a request open forever):

- one event-loop thread for every connection, and aiohttp's C HTTP parser;
- at most ``max_connections`` open connections: beyond that the server stops accepting and
  new connections wait in the kernel's listen queue (``backlog``) instead of costing anything
  here, so a burst of legitimate requests is served as soon as slots free up. While one
  waits there, the oldest connection that holds no request (an idle keep-alive, a socket
  that never sent a byte or only part of its headers) is closed to make room: 3,000 idle
  sockets would otherwise hold every slot for ``idle_timeout_s`` each, and `livecam ctl`
  behind them in the queue would time out; and at most
  ``accepts_per_s`` new connections a second, so a flood (thousands of sockets opened and
  closed) is worked off in small steps with the frame threads running in between, never in
  one long burst of the event loop;
- a connection must send its request line and headers within ``idle_timeout_s`` of
  connecting (or of its previous response), else it is closed;
- the token is checked before a body is read (a signed request's server nonce is: see
  :mod:`livecam.control.gate`), and at most ``max_body_bytes`` are read within
  ``body_timeout_s``. A body left unread (401, 413) is not drained (``linger_s`` 0): the
  connection closes right after the answer. A small body arrives with its headers and is
  already read, so its sender gets the answer; draining a big one cost CPU, and with a chunked
  body 8-9 MB of RSS that stayed after each request (aiohttp's lingering, measured).

Malformed HTTP (a bad request line, ``Content-Length: -1``) is answered 400 by aiohttp itself;
its traceback logging of those is turned into one DEBUG line (see :class:`_OneLine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

log = logging.getLogger(__name__)

#: Listen addresses reachable from this machine only.
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Limits:
    """What one client may hold or send; see the module docstring."""

    max_connections: int = 64
    backlog: int = 256
    accepts_per_s: float = 1000.0
    idle_timeout_s: float = 5.0
    body_timeout_s: float = 5.0
    max_body_bytes: int = 64 * 1024
    linger_s: float = 0.0
    shutdown_s: float = 0.1


#: A token in a request line or header that aiohttp quotes in a parse error.
_SECRET = re.compile(r"(token=|bearer\s+)[^&\s'\"\\]+", re.IGNORECASE)


class _OneLine(logging.Filter):
    """aiohttp logs every malformed request it answers with a 400 as an ERROR with a traceback
    that quotes the offending line: any local program could flood the log (and a JSON log with
    multi-line tracebacks), and the line may hold the token. Keep one DEBUG line per request,
    token masked, emitted only when livecam's control logger is at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text = f"{text}: {type(exc).__name__}: {exc}"
        record.msg = _SECRET.sub(r"\1***", text.replace("\n", " "))
        record.args = ()
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return log.isEnabledFor(logging.DEBUG)


_QUIET = _OneLine()


def _quiet_aiohttp_logs() -> None:
    # idempotent: a filter object is added to a logger at most once
    logging.getLogger("aiohttp.server").addFilter(_QUIET)
    logging.getLogger("aiohttp.web").addFilter(_QUIET)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class HostCheck:
    """Which ``Host`` headers name this server: ``localhost`` and the listen address; for a
    wildcard listen address (0.0.0.0, ::) any IP literal and this machine's host name. A
    DNS-rebinding page sends its own domain name, which never matches."""

    def __init__(self, bound_host: str) -> None:
        names = {"localhost", bound_host.lower()}
        self._any_ip = bound_host in ("0.0.0.0", "::", "")
        if self._any_ip:
            names.add(socket.gethostname().lower())
        if bound_host in LOOPBACK:
            names.update(("127.0.0.1", "::1"))
        self._names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        host = header.strip().lower()
        if host.startswith("["):  # [v6]:port
            host = host[1:].partition("]")[0]
        elif host.count(":") == 1:
            host = host.partition(":")[0]
        host = host.rstrip(".")
        return host in self._names or (self._any_ip and _is_ip(host))


def bind_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port`` (IPv6 when ``host`` has a
    colon); raises ``OSError`` when the address is taken or not ours."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=backlog)
    sock.setblocking(False)
    return sock


class HttpServer:
    """Serves the aiohttp application made by ``make_app`` on ``sock`` from a background
    thread, over TLS with ``ssl_context``. ``start``/``stop``: the owner's thread; ``loop``:
    the server's thread only (others hand it coroutines with
    ``asyncio.run_coroutine_threadsafe``)."""

    def __init__(self, make_app: Callable[[], web.Application], sock: socket.socket,
                 limits: Limits, *, ssl_context: ssl.SSLContext | None = None,
                 name: str = "livecam-control-api") -> None:
        self._make_app = make_app
        self._ssl = ssl_context
        self._handshakes: set[asyncio.Task[None]] = set()
        self._sock = sock
        self._limits = limits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: idle connections closed to make room for a waiting one (the server's thread)
        self.evicted = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's event loop once started."""
        return self._loop

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        """Start serving; returns once the event loop runs."""
        _quiet_aiohttp_logs()
        self._thread.start()
        self._ready.wait(5.0)

    def stop(self, timeout_s: float = 0.3) -> None:
        """Close every connection and end the thread, waiting at most ``timeout_s`` (the
        thread is a daemon: a handler that will not end cannot hold the process). Idempotent."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop just closed by itself
                loop.call_soon_threadsafe(stopping.set)
            self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._sock.close()

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called (handlers of long streams poll it)."""
        return self._stopping is not None and self._stopping.is_set()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(_log_loop_error)
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        limits = self._limits
        runner = web.AppRunner(self._make_app(), handle_signals=False, access_log=None,
                               keepalive_timeout=limits.idle_timeout_s,
                               lingering_time=limits.linger_s,
                               shutdown_timeout=limits.shutdown_s)
        await runner.setup()
        server = runner.server
        assert server is not None  # set by setup()
        accept = asyncio.ensure_future(self._accept(server))
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            accept.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accept
            await runner.cleanup()

    async def _accept(self, server: web.Server) -> None:
        """Accept connections while fewer than ``max_connections`` are open; at the limit,
        leave new ones in the kernel's listen queue until one closes."""
        loop = asyncio.get_running_loop()
        limit = self._limits.max_connections
        spacing_s = 1.0 / self._limits.accepts_per_s
        t_next = loop.time()
        while True:
            while _open(server) >= limit:
                if self._someone_waits() and _evict_oldest_idle(server):
                    self.evicted += 1
                    break
                await asyncio.sleep(0.02)
            if loop.time() < t_next:
                await asyncio.sleep(t_next - loop.time())
            t_next = max(t_next + spacing_s, loop.time())
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:  # e.g. out of file descriptors: back off, keep serving
                log.warning("control API cannot accept a connection: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if self._ssl is not None:  # a handshake in its own task holds no accept
                task = loop.create_task(self._handshake(server, conn))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
                continue
            try:
                await loop.connect_accepted_socket(server, conn)
            except OSError:
                conn.close()

    def _someone_waits(self) -> bool:
        """A connection waits in the listen queue (the listening socket is readable)."""
        try:
            return bool(select.select([self._sock], [], [], 0)[0])
        except (OSError, ValueError):  # closed meanwhile
            return False

    async def _handshake(self, server: web.Server, conn: socket.socket) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                server, conn, ssl=self._ssl,
                ssl_handshake_timeout=self._limits.idle_timeout_s)
        except (OSError, ssl.SSLError, TimeoutError):
            conn.close()


def _open(server: web.Server) -> int:
    """Connections still open (one closed to make room leaves the list a moment later)."""
    return sum(1 for handler in server.connections if handler.transport is not None)


def _evict_oldest_idle(server: web.Server) -> bool:
    """Close the oldest open connection that holds no request (none in progress, none
    parsed and waiting); False when every one is busy. ``server.connections`` is in
    connection order. aiohttp keeps these facts private: read defensively."""
    for handler in server.connections:
        if handler.transport is None:
            continue
        if getattr(handler, "_request_in_progress", True) or getattr(handler, "_messages", ()):
            continue
        handler.force_close()
        return True
    return False


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    # client-caused socket errors end up here; they are not livecam's errors
    log.debug("control API event loop: %s", context.get("message") or context.get("exception"))

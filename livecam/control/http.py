"""The control API's HTTP server: aiohttp on its own thread and event loop, with limits.

The API shares its process with the 30 fps frame threads, so whatever a client does (a flood
of requests, thousands of idle sockets, a huge or endless body) must cost the frame threads
little. Measured against those attacks (docs/control.md), aiohttp was chosen over the stdlib
server (a thread per connection, no timeouts) and over uvicorn + Starlette (which keeps a
connection that never sends a request open forever):

- one event-loop thread for every connection, and aiohttp's C HTTP parser;
- a lobby in front of aiohttp (where the loop has readiness callbacks: Linux, macOS): every
  waiting connection is accepted at once, in batches of 32 per step of the loop, and costs
  a file descriptor and one callback until it sends its first byte; only then does it
  become an aiohttp connection (a request handler, a task, timers: some 0.3 ms of the
  loop's time each, measured). 3,000 sockets that never send a byte cost the server thread
  about 0.06 s of CPU in all instead of 0.3 s and hold no aiohttp slot. The listen queue
  (``backlog``, capped by the kernel: ``net.core.somaxconn``, 4096 on Linux since 5.4) holds
  such a flood whole while the loop drains it, so the kernel drops no connection, `livecam
  ctl`'s included (a dropped one is retried by its client only after a second). The lobby
  holds at most ``lobby`` connections (the oldest is closed for a new one) and closes
  one that sent nothing within ``idle_timeout_s`` of connecting; one closed before sending
  a byte never reaches aiohttp. Accepts are limited to a burst of ``accept_burst`` refilled
  at ``accepts_per_s`` a second, so a client that reconnects as fast as it is closed costs
  a bounded share of the loop. (Windows' proactor loop has no readiness callbacks: there
  connections are accepted one by one, at most ``accepts_per_s`` a second, while fewer
  than ``max_connections`` are open, the rest waiting in the kernel's listen queue.)
- at most ``max_connections`` aiohttp connections: at the limit, the oldest one that holds
  no request (an idle keep-alive, a request line or headers unfinished for ``_GRACE_S``)
  is closed to make room for a new one; when every one holds a request, new ones wait
  (parked, at most ``lobby``) until a slot frees;
- aiohttp closes a connection that has not sent its request line and headers within
  ``idle_timeout_s`` of reaching it (its first byte) or of its previous response;
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
import math
import re
import select
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass

from aiohttp import web

log = logging.getLogger(__name__)

#: Listen addresses reachable from this machine only.
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Limits:
    """What one client may hold or send; see the module docstring."""

    max_connections: int = 64
    backlog: int = 4096
    lobby: int = 256
    accepts_per_s: float = 1000.0
    accept_burst: float = 4000.0
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
        self._tasks: set[asyncio.Task[None]] = set()
        self._sock = sock
        self._limits = limits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: idle connections closed to make room for a waiting one (the server's thread)
        self.evicted = 0
        #: connections given to aiohttp (the lobby's: those that sent a byte)
        self.handed_on = 0
        #: connections that sent a byte while every slot held a request (the server's thread)
        self._parked: deque[socket.socket] = deque()
        #: when each connection the lobby handed on reached aiohttp (loop time)
        self._since: dict[asyncio.BaseProtocol, float] = {}

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
            for task in list(self._tasks):  # hand-overs and TLS handshakes under way
                task.cancel()
            await runner.cleanup()

    async def _accept(self, server: web.Server) -> None:
        loop = asyncio.get_running_loop()
        if isinstance(loop, asyncio.SelectorEventLoop):
            await self._accept_to_lobby(server, loop)
        else:  # Windows' proactor loop has no readiness callbacks
            await self._accept_one_by_one(server, loop)

    async def _accept_to_lobby(self, server: web.Server,
                               loop: asyncio.SelectorEventLoop) -> None:
        """Accept every waiting connection at once (in batches, within a budget of
        ``accept_burst`` refilled at ``accepts_per_s``) into a lobby that only watches for a
        connection's first byte; a connection that sends one goes on to aiohttp (see
        :meth:`_hand_over`). The lobby holds at most ``lobby`` sockets (the oldest is
        closed for a new one) and closes one that sent nothing within ``idle_timeout_s``."""
        limits = self._limits
        lobby = _Lobby(loop, lambda conn: self._hand_over(server, conn), limits.lobby)
        bucket = _Bucket(limits.accept_burst, limits.accepts_per_s, loop.time())
        fd = self._sock.fileno()
        paused: asyncio.TimerHandle | None = None  # not listening until it fires

        def resume() -> None:
            nonlocal paused
            paused = None
            loop.add_reader(fd, readable)

        def pause(delay_s: float) -> None:
            nonlocal paused
            loop.remove_reader(fd)
            paused = loop.call_later(delay_s, resume)

        def readable() -> None:  # the listening socket has connections waiting
            for _ in range(_ACCEPT_BATCH):
                if not bucket.take(loop.time()):
                    pause(bucket.wait_s())
                    return
                try:
                    conn, _ = self._sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:  # e.g. out of file descriptors: back off
                    log.warning("control API cannot accept a connection: %s", exc)
                    pause(0.1)
                    return
                lobby.add(conn)

        loop.add_reader(fd, readable)
        try:
            while True:
                await asyncio.sleep(min(0.25, limits.idle_timeout_s / 4))
                lobby.close_older_than(loop.time() - limits.idle_timeout_s)
                for handler in [h for h in self._since if getattr(h, "transport", None) is None]:
                    del self._since[handler]
        finally:
            if paused is None:
                loop.remove_reader(fd)
            else:
                paused.cancel()
            lobby.close_all()
            for conn in self._parked:
                conn.close()
            self._parked.clear()

    def _hand_over(self, server: web.Server, conn: socket.socket) -> None:
        """Give aiohttp a connection that sent its first byte. At ``max_connections`` the
        oldest connection holding no request (an idle keep-alive, a request unfinished for
        ``_GRACE_S``) is closed to make room; when there is none, the connection waits
        (parked, at most ``lobby``: the oldest waiting is closed for a new one) until a
        slot frees or a connection becomes one to close."""
        if not self._parked and (_open(server) < self._limits.max_connections
                                 or self._evict(server)):
            self._spawn(self._connect(server, conn))
            return
        if len(self._parked) >= max(1, self._limits.lobby):
            self._parked.popleft().close()
        self._parked.append(conn)
        if len(self._parked) == 1:
            self._spawn(self._unpark(server))

    async def _unpark(self, server: web.Server) -> None:
        limit = self._limits.max_connections
        while self._parked:
            while self._parked and (_open(server) < limit or self._evict(server)):
                conn = self._parked.popleft()
                if self._ssl is not None:  # a handshake in its own task holds no other
                    self._spawn(self._connect(server, conn))
                else:  # counted as open once connected: one at a time
                    await self._connect(server, conn)
            if self._parked:
                await asyncio.sleep(0.02)

    def _evict(self, server: web.Server) -> bool:
        loop = asyncio.get_running_loop()
        if _evict_oldest_idle(server, self._since, loop.time() - _GRACE_S):
            self.evicted += 1
            return True
        return False

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, server: web.Server, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self._ssl is None:
                _, handler = await loop.connect_accepted_socket(server, conn)
            else:
                _, handler = await loop.connect_accepted_socket(
                    server, conn, ssl=self._ssl,
                    ssl_handshake_timeout=self._limits.idle_timeout_s)
        except (OSError, ssl.SSLError, TimeoutError):
            conn.close()
            return
        self.handed_on += 1
        self._since[handler] = loop.time()

    async def _accept_one_by_one(self, server: web.Server,
                                 loop: asyncio.AbstractEventLoop) -> None:
        """Accept connections while fewer than ``max_connections`` are open; at the limit,
        leave new ones in the kernel's listen queue until one closes."""
        limit = self._limits.max_connections
        spacing_s = 1.0 / self._limits.accepts_per_s
        t_next = loop.time()
        while True:
            while _open(server) >= limit:
                if self._someone_waits() and _evict_oldest_idle(server, None, loop.time()):
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
                self._spawn(self._handshake(server, conn))
                continue
            try:
                await loop.connect_accepted_socket(server, conn)
            except OSError:
                conn.close()
                continue
            self.handed_on += 1

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


#: connections accepted in one step of the event loop before the others get their turn
_ACCEPT_BATCH = 32
#: a connection that reached aiohttp this recently is not closed to make room: its request
#: may be unread yet (a burst of requests handed on in one step of the loop)
_GRACE_S = 0.25


class _Bucket:
    """A token bucket: ``burst`` at most, refilled at ``rate_per_s``."""

    def __init__(self, burst: float, rate_per_s: float, now: float) -> None:
        self._burst, self._rate = burst, rate_per_s
        self._tokens, self._t = burst, now

    def take(self, now: float) -> bool:
        self._tokens = min(self._burst, self._tokens + (now - self._t) * self._rate)
        self._t = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def wait_s(self) -> float:
        """Until the next token."""
        return max(0.001, (1.0 - self._tokens) / self._rate)


class _Lobby:
    """Accepted connections that have not sent a byte yet, oldest first. Each costs a file
    descriptor and a readiness callback, nothing of aiohttp's: thousands of idle sockets cost
    the event loop little. ``ready`` gets each one that sends a byte; one closed or reset
    before that is closed here."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 ready: Callable[[socket.socket], None], capacity: int) -> None:
        self._loop = loop
        self._ready = ready
        self._capacity = max(1, capacity)
        #: socket -> when accepted (loop time); dicts keep insertion order: oldest first
        self._waiting: dict[socket.socket, float] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, conn: socket.socket) -> None:
        if len(self._waiting) >= self._capacity:
            self._close(next(iter(self._waiting)))
        conn.setblocking(False)
        self._waiting[conn] = self._loop.time()
        self._loop.add_reader(conn.fileno(), self._readable, conn)

    def _readable(self, conn: socket.socket) -> None:
        if conn not in self._waiting:  # closed earlier in the same step of the loop
            return
        try:
            closed = not conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return  # nothing after all
        except OSError:  # reset
            closed = True
        if closed:  # its client gave up before sending anything: aiohttp need not see it
            self._close(conn)
            return
        self._loop.remove_reader(conn.fileno())
        del self._waiting[conn]
        self._ready(conn)

    def _close(self, conn: socket.socket) -> None:
        self._loop.remove_reader(conn.fileno())
        del self._waiting[conn]
        conn.close()

    def close_older_than(self, t: float) -> None:
        """Close every connection accepted before loop time ``t``."""
        while self._waiting:
            conn, since = next(iter(self._waiting.items()))
            if since >= t:
                return
            self._close(conn)

    def close_all(self) -> None:
        while self._waiting:
            self._close(next(iter(self._waiting)))


def _open(server: web.Server) -> int:
    """Connections still open (one closed to make room leaves the list a moment later)."""
    return sum(1 for handler in server.connections if handler.transport is not None)


def _evict_oldest_idle(server: web.Server, since: dict[asyncio.BaseProtocol, float] | None,
                       before: float) -> bool:
    """Close the oldest open connection that holds no request (none in progress, none
    parsed and waiting) and, unless ``since`` is None, reached aiohttp before loop time
    ``before`` (``since``; one not in it yet is being handed on): one just handed on has its
    request in the kernel or in aiohttp's next read. False when there is none.
    ``server.connections`` is in connection order. aiohttp keeps these facts private: read
    defensively."""
    for handler in server.connections:
        if handler.transport is None:
            continue
        if since is not None and since.get(handler, math.inf) > before:
            continue
        if getattr(handler, "_request_in_progress", True) or getattr(handler, "_messages", ()):
            continue
        handler.force_close()
        return True
    return False


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    # client-caused socket errors end up here; they are not livecam's errors
    log.debug("control API event loop: %s", context.get("message") or context.get("exception"))

"""The client side of the control API (``livecam ctl``): one HTTP exchange with one deadline.

urllib's timeout applies to each socket operation, so a server that sends its answer a byte
every few seconds never trips it and holds the caller as long as it likes. Here connecting,
sending the request and reading the answer's status line, headers and body must all end within
``timeout_s`` of the start: a timer shuts the socket down when the time is up, which ends
whatever read or write is blocked on it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    """An answer: its HTTP status and at most ``max_body_bytes + 1`` bytes of its body (one
    more than the limit, so the caller can tell an answer that went over it)."""

    status: int
    body: bytes


def request_target(url: str) -> str:
    """What :func:`exchange` puts on the request line for ``url``: its path and query."""
    parts = urllib.parse.urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def exchange(url: str, *, method: str = "GET", body: bytes | None = None,
             headers: Mapping[str, str] | None = None, timeout_s: float,
             max_body_bytes: int) -> Reply:
    """Send one request to ``url`` (``http://`` or ``https://``) and read its answer, all
    within ``timeout_s``. Redirects are not followed (the answer is returned).

    Raises :class:`TimeoutError` when the time is up (whichever step it was in),
    :class:`OSError` when the connection fails or breaks, and
    :class:`http.client.HTTPException` when the answer is not HTTP. Any thread may call it.
    """
    parts = urllib.parse.urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = kind(parts.hostname or "", parts.port, timeout=timeout_s)
    expired = threading.Event()

    def expire() -> None:  # the timer's thread
        expired.set()
        sock = conn.sock
        if sock is not None:  # else still connecting, which the socket's own timeout bounds
            with contextlib.suppress(OSError):
                # the plain socket's shutdown, also under TLS: it ends a blocked read or write
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        if expired.is_set():  # the timer went off while there was no socket to shut down
            raise TimeoutError
        conn.request(method, request_target(url), body=body, headers=dict(headers or {}))
        response = conn.getresponse()
        data = response.read(max_body_bytes + 1)
    except (OSError, http.client.HTTPException):
        if expired.is_set():  # what the shutdown broke: a reset, a short or cut answer
            raise TimeoutError(f"no complete answer within {timeout_s:g} s") from None
        raise
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():  # a body cut short reads as a short body, not as an error
        raise TimeoutError(f"no complete answer within {timeout_s:g} s")
    return Reply(response.status, data)

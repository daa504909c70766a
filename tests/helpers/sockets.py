"""Idle local connections: a flood of sockets that never send a byte (issue 39 item 13), for
the tests and ``scripts/bench_idle_flood.py``."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def idle_sockets(port: int, n: int = 300,
                 host: str = "127.0.0.1") -> Iterator[list[socket.socket]]:
    """``n`` connections to ``host:port`` that never send a byte, closed at the end.
    Connects are non-blocking (the kernel completes them): a full listen queue must not stall
    the caller itself."""
    idle: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket()
            idle.append(s)
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect((host, port))
        yield idle
    finally:
        for s in idle:
            s.close()

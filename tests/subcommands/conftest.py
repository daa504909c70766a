"""What the `livecam ctl` tests share: running it in process, and a token file."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from livecam.cli import main

#: The token in :func:`token_file`.
TOKEN = "a-token-3f9c1e7b"


def ctl(capsys: pytest.CaptureFixture[str], token_file: Path, *args: str) -> tuple[int, str]:
    """(exit code, stdout + stderr) of `livecam ctl --token-file TOKEN ARGS`, in process."""
    with pytest.raises(SystemExit) as exc:
        main(["ctl", "--token-file", str(token_file), *args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out + err


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "api-token"
    path.write_text(TOKEN + "\n")
    return path


class RawServer:
    """A server on 127.0.0.1 that is not livecam: a thread accepts each connection, reads one
    HTTP request (head and ``Content-Length`` body), keeps every byte it received in
    ``received``, and hands the request to ``answer(conn, request, stop)``, which writes what it
    likes; then the connection is closed. ``stop`` is set when the test ends: an answer that
    waits must wait on it, so the server ends at once."""

    def __init__(self, answer: Callable[[socket.socket, bytes, threading.Event], None]) -> None:
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.received = bytearray()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        # closing a listening socket does not wake a thread blocked in accept(): a connection
        # does, and the thread then sees ``stop``
        with contextlib.suppress(OSError), socket.create_connection(
                self._listener.getsockname(), timeout=5):
            pass
        self._thread.join(10)
        self._listener.close()

    def _serve(self) -> None:
        while True:
            conn, _ = self._listener.accept()
            if self.stop.is_set():
                conn.close()
                return
            with conn:
                conn.settimeout(10)
                # OSError: the client hung up (that is what its deadline does)
                with contextlib.suppress(OSError):
                    self._answer(conn, self._read_request(conn), self.stop)

    def _read_request(self, conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
            self.received += chunk
        head = data.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
        length = next((int(line.partition(":")[2]) for line in head.split("\r\n")
                       if line.startswith("content-length:")), 0)
        while len(data.partition(b"\r\n\r\n")[2]) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
            self.received += chunk
        return data


def http_answer(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    """A whole HTTP/1.1 response."""
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: "
            f"{len(body)}\r\nConnection: close\r\n\r\n").encode() + body

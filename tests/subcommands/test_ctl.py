"""``livecam ctl`` aimed at something that is not livecam's control API (another program on
the port, a wrong --url): one line that says so and exit 1 (2 for a malformed --url), never a
traceback and never a made-up state. The real API's answers are tested in tests/control."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.subcommands.conftest import ctl


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every GET and POST with the class's status and body."""

    status = 200
    content_type = "text/html"
    body = b"<html><body>a web server</body></html>"

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["html", "other json", "list json", "html 404"])
def web_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """Another HTTP server on the port livecam's API should be on."""
    body, status, kind = {
        "html": (_Answer.body, 200, "text/html"),
        "other json": (b'{"ok": true, "items": [1, 2]}', 200, "application/json"),
        "list json": (b'["a", "b"]', 200, "application/json"),
        "html 404": (b"<html>File not found</html>", 404, "text/html"),
    }[request.param]
    handler = type("Handler", (_Answer,), {"body": body, "status": status,
                                           "content_type": kind})
    yield from _serve(handler)


@pytest.fixture
def not_http() -> Iterator[str]:
    """A service that is not HTTP at all (it greets like SSH, then hangs up)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def greet() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    thread = threading.Thread(target=greet, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def _one_line_not_livecam(code: int, output: str) -> None:
    assert code == 1, output
    assert output.startswith("livecam: error: ") and output.count("\n") == 1, output
    assert "not a livecam control API" in output


ACTIONS = [["status"], ["status", "--json"], ["identities"], ["next"], ["select", "alice"],
           ["bypass", "on"], ["snapshot"], ["delay", "40"]]


@pytest.mark.parametrize("action", ACTIONS, ids=" ".join)
def test_another_web_server_on_the_port_is_named_not_livecam(
        capsys: pytest.CaptureFixture[str], token_file: Path, web_server: str,
        action: list[str]) -> None:
    # before: a JSONDecodeError, KeyError or TypeError traceback; `next` and `delay` printed
    # a made-up state and exited 0; a 404 page said 'File not found' (exit 2)
    code, output = ctl(capsys, token_file, "--url", web_server, *action)
    _one_line_not_livecam(code, output)


@pytest.mark.parametrize("action", [["status"], ["next"]], ids=" ".join)
def test_a_service_that_is_not_http_is_named_not_livecam(
        capsys: pytest.CaptureFixture[str], token_file: Path, not_http: str,
        action: list[str]) -> None:
    # before: an http.client.BadStatusLine traceback
    code, output = ctl(capsys, token_file, "--url", not_http, *action)
    _one_line_not_livecam(code, output)


@pytest.mark.parametrize("url", ["localhost:8765", "foo", "http://[::1", "ftp://127.0.0.1:1",
                                 "http://127.0.0.1:99999", "http://"])
def test_a_malformed_url_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                            token_file: Path, url: str) -> None:
    # before: 'unknown url type' and 'Invalid IPv6 URL' were ValueError tracebacks
    code, output = ctl(capsys, token_file, "--url", url, "status")
    assert code == 2, output
    assert output.startswith("livecam: error: ") and output.count("\n") == 1, output
    assert "--url" in output

"""The control API against bytes no HTTP client sends (issue 39, items 12 and 16): each test
failed before its fix. Raw sockets, against the real server of a running app."""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest

from livecam.control.ratelog import RateLimitedLog, printable
from tests.control.conftest import Running


def _address(r: Running) -> tuple[str, int]:
    host, port = r.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _exchange(r: Running, raw: bytes, timeout_s: float = 60.0) -> tuple[int | None, bytes]:
    """(status, body) of the one response to ``raw``; (None, b"") if the server said nothing."""
    with socket.create_connection(_address(r), timeout=timeout_s) as sock:
        sock.sendall(raw)
        data = b""
        try:
            while True:  # every answer here closes the connection or is short
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                head, sep, body = data.partition(b"\r\n\r\n")
                if sep and b"content-length" in head.lower():
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    if len(body) >= length:
                        break
        except (TimeoutError, ConnectionError):
            pass
    if not data:
        return None, b""
    return int(data.split(b" ", 2)[1]), data.partition(b"\r\n\r\n")[2]


def _get(r: Running, target: bytes, auth: bytes | None) -> bytes:
    lines = [b"GET " + target + b" HTTP/1.1", b"Host: 127.0.0.1"]
    if auth is not None:
        lines.append(b"Authorization: " + auth)
    return b"\r\n".join(lines) + b"\r\n\r\n"


@pytest.mark.parametrize("auth", [
    b"Bearer ab\xffcd",            # not UTF-8 at all
    b"Bearer \xc3\x28",            # a broken two-byte sequence
    b"Bearer \xed\xa0\x80",        # a UTF-8-encoded surrogate
    b"bearer \xff",
    b"Livecam-HMAC \xff\xfe \xff",  # the signed scheme with garbage nonce and MAC
])
def test_a_token_that_is_not_utf8_is_401(running: Running, auth: bytes,
                                         caplog: pytest.LogCaptureFixture) -> None:
    # old: 500 and an ERROR line per request (token_matches encoded the header to UTF-8)
    caplog.set_level(logging.DEBUG)
    status, body = _exchange(running, _get(running, b"/api/status", auth))
    assert status == 401 and json.loads(body)["error"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_signed_request_with_bytes_that_are_not_utf8_in_its_path_is_refused(
        running: Running) -> None:
    nonce = json.loads(_exchange(running, _get(
        running, b"/api/challenge?nonce=" + b"0" * 32, None))[1])["nonce"]
    status, _ = _exchange(running, _get(running, b"/api/status?x=\xff",
                                        b"Livecam-HMAC " + nonce.encode() + b" " + b"0" * 64))
    assert status in (400, 401)


def test_failed_authentication_is_logged_at_most_once_a_second_with_a_count(
        running: Running, caplog: pytest.LogCaptureFixture) -> None:
    # old: nothing was logged for a 401 (and one ERROR line per request for the 500 above)
    caplog.set_level(logging.INFO, logger="livecam.control")
    sent = 60
    t0 = time.monotonic()
    for k in range(sent):
        auth = b"Bearer \xff" if k % 2 else b"Bearer wrong-token"
        assert _exchange(running, _get(running, b"/api/status", auth))[0] == 401
    elapsed_s = time.monotonic() - t0
    running.server.stop()  # writes the count of refusals not written yet
    lines = [r.getMessage() for r in caplog.records if r.name == "livecam.control.gate"]
    assert 1 <= len(lines) <= elapsed_s / 1.0 + 2, lines  # one a second, + the stop's
    counts = [int(line.split("token: ")[1].split()[0]) for line in lines]
    assert sum(counts) == sent, lines
    assert "wrong-token" not in "\n".join(lines) and "GET /api/status" in lines[0]


@pytest.mark.parametrize("stream", [b"%C2%B2", b"%D9%A3", b"%EF%BC%91", b"-0", b"+0", b"%20"])
def test_a_stream_number_is_ascii_digits_only(running: Running, stream: bytes) -> None:
    # old: "²" passed str.isdigit() and int("²") raised: 500 and an ERROR line
    status, body = _exchange(running, _get(
        running, b"/api/status?stream=" + stream, b"Bearer " + running.token.encode()))
    assert status == 400 and "stream must be" in json.loads(body)["error"]
    ok, _ = _exchange(running, _get(running, b"/api/status?stream=0",
                                    b"Bearer " + running.token.encode()))
    assert ok == 200


class _Clock:
    def __init__(self) -> None:
        self.t_s = 100.0

    def __call__(self) -> float:
        return self.t_s


def test_rate_limited_log_writes_the_first_then_one_line_a_second_with_counts(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    logger = logging.getLogger("livecam.test.ratelog")
    limited = RateLimitedLog(logger, "refused", interval_s=1.0, clock=clock)
    caplog.set_level(logging.INFO, logger="livecam.test.ratelog")
    for _ in range(1000):  # 1000 events within 0.5 s: one line (the first)
        limited.event("why")
        clock.t_s += 0.0005
    clock.t_s += 0.6
    limited.event("last")  # past the second: the 999 folded ones and this one
    limited.flush()  # nothing pending: nothing written
    assert [r.getMessage() for r in caplog.records] == [
        "refused: 1 (latest: why)", "refused: 1000 in the last 1.1 s (latest: last)"]
    assert limited.total == 1001


def test_printable_escapes_what_a_client_sent() -> None:
    assert printable("/api/\udcff\u00e9") == "/api/\\udcff\\xe9"
    assert printable("x" * 500).endswith("...") and len(printable("x" * 500)) == 203

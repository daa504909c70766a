"""The HTTP side of ``livecam ctl``: the control API's address, one signed request and its
answer checked as livecam's, each failure as one line."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from livecam.core.errors import LivecamError

if TYPE_CHECKING:
    from livecam.control.client import Reply

TIMEOUT_S = 5.0
#: The most of an answer read: the metrics of 64 streams take well under a megabyte; a
#: program on the port that sends without end must not fill the memory.
_MAX_REPLY_BYTES = 16 << 20
#: What every status reply holds (what :func:`_print_status` reads).
STATUS_KEYS = frozenset({"active_identity", "bypass", "fps_in", "fps_out", "latency_ms",
                          "tracks", "identities", "backend", "output", "width", "height",
                          "fps", "frames"})


def base_url(address: str) -> str:
    from livecam.control.api import parse_address

    host, port = parse_address(address)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # a wildcard bind is reachable on loopback
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def checked_base(url: str) -> str:
    """``url`` without a trailing slash; :class:`UsageError` unless it is an http(s) URL with a
    host (urllib raised ValueError tracebacks for 'localhost:8765' or 'http://[::1')."""
    from livecam.core.errors import UsageError

    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError as exc:
        raise UsageError(f"--url {url!r} is not a URL ({exc}): give it as "
                         "http://HOST:PORT") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--url {url!r} is not an http:// URL with a host: give it as "
                         "http://HOST:PORT")
    return url.rstrip("/")


def _origin(url: str) -> str:
    """``http://host:port`` of an API URL (what the messages name)."""
    return url.split("/api")[0].split("/metrics")[0]


def not_livecam(url: str, why: str) -> LivecamError:
    return LivecamError(f"{_origin(url)} is not a livecam control API ({why}): check "
                        "control.api_address / --url")


def json_reply(raw: bytes, url: str, shape: Callable[[Any], bool]) -> Any:
    """The JSON in ``raw`` if ``shape`` accepts it; else the program at ``url`` is not
    livecam (another web server on the port): say so rather than print a made-up state."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise not_livecam(url, "its answer is not JSON") from None
    if not shape(value):
        raise not_livecam(url, "its answer is not livecam's")
    return value


def is_status(value: Any) -> bool:
    """A stream's status, or (``livecam serve`` between sessions) that none runs."""
    return isinstance(value, dict) and (value.keys() >= STATUS_KEYS
                                        or value.get("streams") == [])


def is_identities(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and {"index", "name"} <= item.keys() for item in value)


def is_command_reply(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("state"), dict)
            and {"active_identity", "bypass"} <= value["state"].keys())


def _exchange(url: str, *, method: str = "GET", body: bytes | None = None,
              headers: dict[str, str] | None = None, timeout_s: float = TIMEOUT_S) -> Reply:
    """One exchange with the program at ``url``, all of it within ``timeout_s``; what went
    wrong on the way (nothing answers, too slow, not HTTP, too long) as one line."""
    from livecam.control.client import exchange

    try:
        reply = exchange(url, method=method, body=body, headers=headers, timeout_s=timeout_s,
                         max_body_bytes=_MAX_REPLY_BYTES)
    except TimeoutError:
        raise LivecamError(f"{_origin(url)} did not answer within {timeout_s:g} s (connecting, "
                           "sending the request and reading the whole answer): is livecam "
                           "stuck, or is another program on the port? check "
                           "control.api_address / --url") from None
    except OSError as exc:
        raise LivecamError(f"no livecam control API at {_origin(url)} ({exc}): start `livecam "
                           "run` or `livecam daemon`, or check control.api_address / --url"
                           ) from None
    except http.client.HTTPException as exc:  # it answered, but not in HTTP (ssh, a database)
        raise not_livecam(url, f"it does not answer in HTTP: {type(exc).__name__}") from None
    if len(reply.body) > _MAX_REPLY_BYTES:
        raise not_livecam(url, f"its answer is over {_MAX_REPLY_BYTES >> 20} MiB")
    return reply


def _error_message(reply: Reply, url: str) -> str:
    """livecam answers every error as {"error": "..."}; anything else is another program."""
    return str(json_reply(reply.body, url, lambda v: isinstance(v, dict)
                           and isinstance(v.get("error"), str))["error"])


def _body(reply: Reply, url: str) -> bytes:
    """The body of a 2xx answer; a one-line error for any other (:class:`UsageError` for a 400
    or 404, exit 2; else :class:`LivecamError`, exit 1)."""
    from livecam.core.errors import UsageError

    if 200 <= reply.status < 300:
        return reply.body
    message = _error_message(reply, url)
    if reply.status in (400, 404):
        raise UsageError(message)
    if reply.status == 401:
        raise LivecamError(f"the control API refused the request ({message})")
    if reply.status == 409:  # the stream (or every stream) has ended
        raise LivecamError(message)
    raise LivecamError(f"control API error {reply.status}: {message}")


def _server_nonce(url: str, token: str) -> str:
    """Have the program at ``url`` prove that it holds ``token`` (steps 1-3 of
    :mod:`livecam.control.handshake`); its nonce for one signed request. When it does not,
    :class:`LivecamError` in one line, and nothing of the token has left this process."""
    from livecam.control import handshake

    client_nonce = handshake.new_nonce()
    challenge = f"{_origin(url)}{handshake.CHALLENGE_PATH}?nonce={client_nonce}"
    reply = _exchange(challenge)
    where = urllib.parse.urlsplit(url).netloc
    if reply.status in (401, 404):  # a livecam without /api/challenge, or one mimicking it
        _error_message(reply, challenge)  # not livecam's {"error": ...}: 'not a livecam API'
        raise LivecamError(f"the program on {where} did not prove it holds livecam's control "
                           "token: it is a livecam older than this `livecam ctl` (restart it) "
                           "or not this user's livecam (token not sent)")
    answer = json_reply(_body(reply, challenge), challenge, lambda v: isinstance(v, dict)
                         and handshake.is_nonce(v.get("nonce")) and "proof" in v)
    if not handshake.proof_matches(token, client_nonce, answer["proof"]):
        raise LivecamError(f"the program on {where} does not hold livecam's control token: it "
                           "is not this user's livecam (token not sent); if it is a livecam "
                           "run as another user or with another advanced.control.token_file, pass "
                           "--token-file")
    return str(answer["nonce"])


def request(url: str, token: str, method: str = "GET", body: dict[str, Any] | None = None,
             timeout_s: float = TIMEOUT_S) -> bytes:
    """The body of the answer to one request. The request goes out only once the server has
    proved that it holds the token, and signed with it rather than carrying it (see
    :mod:`livecam.control.handshake`): a program that took livecam's port gets nothing it
    could act with. Each exchange ends within its time (5 s; ``timeout_s`` for the request)."""
    from livecam.control.client import request_target
    from livecam.control.handshake import signed_authorization

    server_nonce = _server_nonce(url, token)
    data = b"" if body is None else json.dumps(body).encode()
    auth = signed_authorization(token, server_nonce, method, request_target(url), data)
    reply = _exchange(url, method=method, body=data or None,
                      headers={"Authorization": auth, "Content-Type": "application/json"},
                      timeout_s=timeout_s)
    return _body(reply, url)

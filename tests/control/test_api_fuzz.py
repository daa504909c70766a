"""Fuzzing the control API's request parsing with hypothesis: paths, methods, headers, bodies
and JSON. Whatever arrives, the answer is one of the documented statuses (JSON for every error
the API itself gives), nothing is logged as an error or with a traceback, and nothing hangs.

The parser functions are fuzzed directly (fast, many examples); whole requests go to a real
running app over raw sockets (slower, fewer examples).
"""

from __future__ import annotations

import json
import logging
import socket
import string
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livecam.config import Config
from livecam.control.requests import VERBS, RequestError, build_command, parse_body
from livecam.core import commands as cmd
from livecam.pipeline.passthrough import PassThrough
from tests.control.conftest import NAMES, PhotoCatalog, Running, start_running
from tests.control.test_api_hardening import _read_response

# what the API documents (docs/control.md); 200 only for a valid, authorised request
DOCUMENTED = {200, 400, 401, 404, 405, 408, 413, 421, 503}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)
bodies = st.dictionaries(st.sampled_from(["name", "index", "on", "track_id", "ms", "x", ""])
                         | st.text(max_size=8), json_values, max_size=4)


@settings(max_examples=400, deadline=None)
@given(verb=st.sampled_from([*VERBS, "nothing", ""]), body=bodies)
def test_build_command_refuses_or_builds(verb: str, body: dict) -> None:
    try:
        command = build_command(verb, body, names=NAMES, snapshot_path=lambda: "/snaps/x.png")
    except RequestError as exc:
        assert exc.status in (HTTPStatus.BAD_REQUEST, HTTPStatus.NOT_FOUND)
        assert str(exc) and "\n" not in str(exc)
        return
    assert verb in VERBS
    assert set(body) <= {"name", "index", "on", "track_id", "ms"}
    # what was built is within range, whatever came in
    if isinstance(command, cmd.SetOutputDelay):
        assert 0 <= command.delay_ms <= cmd.MAX_OUTPUT_DELAY_MS
    elif isinstance(command, cmd.SelectIdentityIndex):
        assert 0 <= command.index < len(NAMES) and not isinstance(command.index, bool)
    elif isinstance(command, (cmd.SelectIdentity, cmd.AssignTrack)):
        assert command.name is None or command.name in NAMES
    elif isinstance(command, cmd.SetBypass):
        assert isinstance(command.on, bool)


@settings(max_examples=400, deadline=None)
@given(raw=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode())
       | st.text(max_size=200).map(str.encode))
def test_parse_body_gives_a_dict_or_a_400(raw: bytes) -> None:
    try:
        body = parse_body(raw)
    except RequestError as exc:
        assert exc.status == HTTPStatus.BAD_REQUEST
        return
    assert isinstance(body, dict)


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    from skimage import data

    from livecam.config import load_config

    config: Config = load_config(None, ["advanced.pipeline.status_interval_s=0"])
    photo = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    r = start_running(config, Path(tmp_path_factory.mktemp("fuzz")),
                      PhotoCatalog(photo, NAMES), stages=[PassThrough()])
    try:
        yield r
    finally:
        r.app.stop()


token_choice = st.sampled_from(["good", "bad", "none", "query"])
paths = (st.sampled_from(["/", "/panel", "/api/status", "/api/identities", "/metrics",
                          "/api/preview.jpg", "/api/identities/bob/thumbnail.jpg",
                          "/api/identities/..%2f..%2fetc/thumbnail.jpg", "/api/select",
                          "/api/bypass", "/api/assign", "/api/delay", "/api/next", "//api/status",
                          "/api/status/", "/api/%00", "/api/select?index=1"])
         | st.text(alphabet=string.ascii_letters + string.digits + "/%._-~?&=",
                   min_size=1, max_size=40).map(lambda t: "/" + t))
header_names = st.text(alphabet=string.ascii_letters + string.digits + "-", min_size=1,
                       max_size=20)
header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                        max_size=60)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH",
                               "get", "BREW"]),
       path=paths, auth=token_choice,
       headers=st.dictionaries(header_names, header_values, max_size=4),
       body=st.binary(max_size=200) | bodies.map(lambda b: json.dumps(b).encode()))
def test_any_request_gets_a_documented_answer(fuzz_app: Running, method: str, path: str,
                                              auth: str, headers: dict[str, str], body: bytes,
                                              caplog: pytest.LogCaptureFixture) -> None:
    host, port = fuzz_app.url.removeprefix("http://").rsplit(":", 1)
    if auth == "query":
        path += ("&" if "?" in path else "?") + f"token={fuzz_app.token}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}",
             f"Content-Length: {len(body)}", "Connection: close"]
    if auth == "good":
        lines.append(f"Authorization: Bearer {fuzz_app.token}")
    elif auth == "bad":
        lines.append("Authorization: Bearer nope")
    lines += [f"{k}: {v}" for k, v in headers.items()
              if k.lower() not in ("host", "content-length", "transfer-encoding", "connection",
                                   "authorization", "expect", "upgrade")]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    caplog.set_level(logging.DEBUG)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        status, reply_headers, reply = _read_response(sock, timeout_s=10)
    assert status in DOCUMENTED, (raw[:200], status)
    if status != 200 and method != "HEAD" and "json" in reply_headers.get("content-type", ""):
        assert json.loads(reply)["error"]
    if auth in ("bad", "none"):
        assert status in (400, 401, 421), raw[:200]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not fuzz_app.app.done

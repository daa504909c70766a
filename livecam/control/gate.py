"""Who may use the control API: the ``Host`` check, then the token, before anything else.

A request shows the token itself (``Authorization: Bearer TOKEN`` or ``?token=TOKEN``: the
panel, Prometheus, scripts), or proves it holds the token with a signed request
(``Authorization: Livecam-HMAC S M``: ``livecam ctl``, see :mod:`livecam.control.handshake`).
``GET /api/challenge`` alone needs neither: it is how a client has the server prove that *it*
holds the token. A token shown is checked before the body is read; a signed request's server
nonce is checked first, then its body is read (within the same limits as a command's: the
signature covers it), then its signature checked, and only then its nonce spent. Runs on the
API's event-loop thread.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import web

from livecam.control import handshake
from livecam.control.apply import read_body
from livecam.control.auth import token_matches
from livecam.control.http import HostCheck, Limits
from livecam.control.ratelog import RateLimitedLog, printable
from livecam.control.requests import RequestError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_error(status: HTTPStatus, message: str, *, close: bool = False,
               headers: dict[str, str] | None = None) -> web.Response:
    """``{"error": message}`` with ``status``; ``close`` ends the connection after it."""
    response = web.json_response({"error": message}, status=status,
                                 headers={"Cache-Control": "no-store", **(headers or {})})
    if close:
        response.force_close()
    return response


class Gate:
    """The API's access check (:meth:`middleware`) and its challenge endpoint
    (:meth:`challenge`). ``token`` is set once, before the server serves."""

    def __init__(self, hosts: HostCheck, limits: Limits) -> None:
        self.token = ""
        self._hosts = hosts
        self._limits = limits
        self._nonces = handshake.ServerNonces()
        # any local program can send requests that fail: one line a second, with a count
        self.refusals = RateLimitedLog(log, "control API refused requests without a valid "
                                       "token")

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Host, then the token (or the challenge endpoint, which needs none)."""
        if not self._hosts.allows(request.headers.get("Host")):
            raise RequestError(HTTPStatus.MISDIRECTED_REQUEST, "the Host header must name "
                               "this server (its listen address or localhost)")
        if request.path == handshake.CHALLENGE_PATH:
            return await handler(request)
        if request.path == "/favicon.ico" and request.method in ("GET", "HEAD"):
            # a browser asks for it unprompted (the OBS dock's console showed a 401 per load)
            return web.Response(status=HTTPStatus.NO_CONTENT)
        auth = request.headers.get("Authorization", "")
        signed = handshake.parse_signed(auth)
        if signed is not None:
            refusal = await self._check_signed(request, *signed)
        elif self._shown_token_matches(request, auth):
            refusal = None
        else:
            refusal = ("missing or wrong token: use `livecam ctl` or `livecam ctl panel-url`, "
                       "which read the token file")
        if refusal is not None:
            self.refusals.event(f"{request.method} {printable(request.path)} from "
                                f"{request.remote}: {refusal.partition(':')[0]}")
            return json_error(HTTPStatus.UNAUTHORIZED, refusal, close=True,
                              headers={"WWW-Authenticate": 'Bearer realm="livecam"'})
        return await handler(request)

    def _shown_token_matches(self, request: web.Request, auth: str) -> bool:
        given = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if given is None:
            given = request.query.get("token")
        return token_matches(self.token, given)

    async def _check_signed(self, request: web.Request, nonce: str, mac: str) -> str | None:
        """Why the signed request is refused; None when its signature is right (its server
        nonce is then spent: a wrong M spends nothing, so a guess cannot void a ctl's S)."""
        nonce_refusal = ("signed request refused: its server nonce is unknown, used or expired, "
                         "or was voided by a flood of signed requests (ask /api/challenge for a "
                         "new one)")
        if not self._nonces.usable(nonce):
            return nonce_refusal
        body = await read_body(request, self._limits)  # cached: the handler reads it again
        if not handshake.mac_matches(self.token, nonce, request.method, request.raw_path,
                                     body, mac):
            return "signed request refused: wrong signature (another token?)"
        if not self._nonces.spend(nonce):  # a copy of this request got in while this one read
            return nonce_refusal
        return None

    async def challenge(self, request: web.Request) -> web.Response:
        """``GET /api/challenge?nonce=C``: ``{"proof", "nonce"}`` (step 2 of the handshake)."""
        client_nonce = request.query.get("nonce")
        if not handshake.is_nonce(client_nonce):
            raise RequestError(HTTPStatus.BAD_REQUEST, "nonce must be 32 lowercase hex "
                               "characters (16 random bytes)")
        return web.json_response(
            {"proof": handshake.server_proof(self.token, client_nonce),
             "nonce": self._nonces.issue()}, headers={"Cache-Control": "no-store"})

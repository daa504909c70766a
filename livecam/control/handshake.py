"""How ``livecam ctl`` and the control API prove to each other that they hold the token, without
sending it.

``livecam ctl`` must not send the token to whatever listens on the API's port: while livecam is
not running, any local user can listen there and keep what ctl sends, then use it against the
real livecam later. So ctl first asks the server to prove that it holds the token, and only then
sends its request, signed so that it proves ctl holds the token too. The token never crosses the
wire, and nothing that does can be used again::

    1. ctl     GET /api/challenge?nonce=C                    (no credentials)
    2. server  {"proof": HMAC(token, "livecam-server-proof\\n" C), "nonce": S}
    3. ctl     checks the proof (hmac.compare_digest); a wrong or missing one ends ctl here
    4. ctl     the request, with  Authorization: Livecam-HMAC S M
               M = HMAC(token, "livecam-request\\n" S "\\n" METHOD "\\n" TARGET "\\n" BODY)

HMAC is HMAC-SHA256 keyed with the token's UTF-8 bytes, written in lowercase hex. C and S are 16
random bytes in hex. TARGET is the request's path and query exactly as sent; BODY its bytes
(empty for none). The server hands out each S for one request within
:data:`SERVER_NONCE_TTL_S`: S is spent by the first request that names it, whether its M is
right or not, so a replayed request is refused. The two messages start with different labels,
so a proof, which the server gives anyone who asks, never passes as a request's M.

An impostor that relays ctl's challenge to a real livecam (of the same user) gets a true proof
back; what it can then do with ctl's signed request is pass that same request on, once, to that
livecam: what ctl asked for anyway. Anyone who can reach the API gets proofs for nonces of their
choosing, so they can test guesses of the token offline: nothing against the 32 random bytes
livecam makes (:mod:`livecam.control.auth`), but a token a person typed into the file would
fall to a dictionary.

Browsers (the panel), Prometheus and scripts still send the token itself (``Authorization:
Bearer TOKEN`` or ``?token=TOKEN``); they are told the server's address by the user, not by
whatever holds the port.

Pure functions and one small class; only the standard library, so ``livecam ctl`` stays light.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeGuard

#: The endpoint of step 1; it needs no token (it gives none away).
CHALLENGE_PATH = "/api/challenge"
#: The ``Authorization`` scheme of a signed request (step 4).
SCHEME = "Livecam-HMAC"
#: How long a server nonce S stays good: ctl sends its request right after the proof, so this
#: only has to cover a slow, loaded host.
SERVER_NONCE_TTL_S = 30.0
#: Server nonces outstanding at most; past this the oldest is dropped. Each costs ~100 bytes, so
#: a local flood of challenges costs the server little; it can make a ctl's request fail (its S
#: dropped before it came back), which that flood could do to the API anyway.
MAX_SERVER_NONCES = 4096

_NONCE_BYTES = 16
_HEX = frozenset("0123456789abcdef")


def new_nonce() -> str:
    """A fresh nonce: 16 random bytes as 32 lowercase hex characters."""
    return secrets.token_hex(_NONCE_BYTES)


def is_nonce(text: object) -> TypeGuard[str]:
    """True for what :func:`new_nonce` makes (and nothing longer, shorter or odder)."""
    return isinstance(text, str) and len(text) == 2 * _NONCE_BYTES and set(text) <= _HEX


def _mac(token: str, message: bytes) -> str:
    return hmac.new(token.encode("utf-8"), message, hashlib.sha256).hexdigest()


def server_proof(token: str, client_nonce: str) -> str:
    """Step 2: the server's proof that it holds ``token``, for the client's nonce C."""
    return _mac(token, b"livecam-server-proof\n" + client_nonce.encode("ascii"))


def proof_matches(token: str, client_nonce: str, proof: object) -> bool:
    """Step 3, in constant time: is ``proof`` (as the server sent it) the one for C?"""
    if not isinstance(proof, str) or not proof.isascii():
        return False
    return hmac.compare_digest(server_proof(token, client_nonce), proof)


def request_mac(token: str, server_nonce: str, method: str, target: str, body: bytes) -> str:
    """Step 4's M for one request: ``target`` is its path and query as sent."""
    head = f"livecam-request\n{server_nonce}\n{method.upper()}\n{target}\n"
    return _mac(token, head.encode("utf-8") + body)


def signed_authorization(token: str, server_nonce: str, method: str, target: str,
                         body: bytes) -> str:
    """The ``Authorization`` header of a signed request."""
    return f"{SCHEME} {server_nonce} {request_mac(token, server_nonce, method, target, body)}"


def parse_signed(header: str) -> tuple[str, str] | None:
    """(S, M) of a ``Livecam-HMAC S M`` header; None for any other scheme. S and M are not
    checked here: :meth:`ServerNonces.take` and :func:`mac_matches` do that."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != SCHEME.lower():
        return None
    nonce, _, mac = rest.strip().partition(" ")
    return nonce, mac.strip()


def mac_matches(token: str, server_nonce: str, method: str, target: str, body: bytes,
                mac: str) -> bool:
    """Is ``mac`` the request's M (constant time)?"""
    if not mac.isascii():
        return False
    return hmac.compare_digest(request_mac(token, server_nonce, method, target, body), mac)


class ServerNonces:
    """The server nonces handed out and not yet used: each is good for one request within
    ``ttl_s`` of being issued. Not thread-safe: the API's event-loop thread alone calls it."""

    def __init__(self, *, ttl_s: float = SERVER_NONCE_TTL_S, most: int = MAX_SERVER_NONCES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._most = most
        self._clock = clock
        self._expiry: OrderedDict[str, float] = OrderedDict()  # oldest first

    def issue(self) -> str:
        """A new nonce, good until ``ttl_s`` from now, for one :meth:`take`."""
        now = self._clock()
        while self._expiry and (len(self._expiry) >= self._most
                                or next(iter(self._expiry.values())) <= now):
            self._expiry.popitem(last=False)
        nonce = new_nonce()
        self._expiry[nonce] = now + self._ttl_s
        return nonce

    def take(self, nonce: str) -> bool:
        """Spend ``nonce``: True if it was issued here, is unused and has not expired."""
        expiry = self._expiry.pop(nonce, None)
        return expiry is not None and self._clock() < expiry

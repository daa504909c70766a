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
bytes in hex: C random, S opaque to ctl. TARGET is the request's path and query exactly as sent;
BODY its bytes (empty for none). The server lets in one request per S, within
:data:`SERVER_NONCE_TTL_S` of handing it out, so a replayed request is refused. The two
messages start with different labels, so a proof, which the server gives anyone who asks, never
passes as a request's M.

The server keeps nothing per S it hands out (:class:`ServerNonces`): S carries its own issue
time and a MAC of it under a secret of the server's process (never the token). Anyone may ask
for challenges, so a store of S handed out would be theirs to fill: either it grows, or it drops
the S that a ctl holds before its request comes back. What the server does keep is each S spent
by a request whose M was right, until it expires: only holders of the token add to that, and
at most :data:`SPENT_NONCES_MAX` of them (a looping script, or a bug, that holds the token must
not grow it without bound). Past that the server forgets the spent S that expires first, and
refuses from then on every S that expires no later, spent or not: a forgotten S is never let in
again. A request with a wrong M spends nothing, so no one without the token can void the S
that a ctl holds. S keeps the format of C, so a ``livecam ctl`` older than this scheme of S
takes it too.

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
import heapq
import hmac
import secrets
import time
from collections.abc import Callable
from typing import TypeGuard

#: The endpoint of step 1; it needs no token (it gives none away).
CHALLENGE_PATH = "/api/challenge"
#: The ``Authorization`` scheme of a signed request (step 4).
SCHEME = "Livecam-HMAC"
#: How long a server nonce S stays good: ctl sends its request right after the proof, so this
#: only has to cover a slow, loaded host. Longer also keeps each spent S remembered longer.
SERVER_NONCE_TTL_S = 30.0
#: The most spent server nonces kept at once (each until it expires). Past it the one that
#: expires first is forgotten, and every S that expires no later is refused from then on, spent
#: or not, so none is let in twice. A ctl signs right after its challenge: its S is voided only
#: if more signed requests than this got in meanwhile. Higher: more memory under a flood of
#: signed requests; lower: an S held for a while on a loaded host is voided by fewer of them.
SPENT_NONCES_MAX = 4096

_NONCE_BYTES = 16
#: S is its issue stamp (ns since its :class:`ServerNonces` was made, big-endian) and then a MAC
#: of that stamp cut to 8 bytes. The MAC keeps a program that held the port from giving ctl an
#: S stamped to pass at the real livecam later (and replaying ctl's request there); a made-up S
#: passes one time in 2**64, each try one refused request.
_STAMP_BYTES = 8
_TAG_BYTES = _NONCE_BYTES - _STAMP_BYTES
_SECRET_BYTES = 32
_HEX = frozenset("0123456789abcdef")


def new_nonce() -> str:
    """A fresh nonce: 16 random bytes as 32 lowercase hex characters."""
    return secrets.token_hex(_NONCE_BYTES)


def is_nonce(text: object) -> TypeGuard[str]:
    """True for what :func:`new_nonce` and :meth:`ServerNonces.issue` make (and nothing longer,
    shorter or odder)."""
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
    checked here: :class:`ServerNonces` and :func:`mac_matches` do that."""
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
    """The server nonces S: each lets in one request within ``ttl_s`` of being issued.

    Nothing is kept per S issued: each S carries its issue stamp and a MAC of it under a random
    secret of this object, so issuing costs no memory and no number of issues can void an S that
    a client still holds. A restart (a new object) voids every S issued before it. What is kept
    is each S :meth:`spend` let in, until it expires, so none is let in twice; the caller spends
    S only for requests whose M is right, so only holders of the token add to it. At most
    ``max_spent`` are kept: past that the one that expires first is forgotten, and every S that
    expires no later than it is refused from then on (spent or not), so a forgotten S is never
    let in again.

    ``clock_ns`` is monotonic, in nanoseconds. Not thread-safe: the API's event-loop thread
    alone calls it.
    """

    def __init__(self, *, ttl_s: float = SERVER_NONCE_TTL_S,
                 max_spent: int = SPENT_NONCES_MAX,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        if max_spent < 1:
            raise ValueError(f"max_spent must be 1 or more, got {max_spent}")
        self._ttl_ns = round(ttl_s * 1e9)
        self._max_spent = max_spent
        self._clock_ns = clock_ns
        self._secret = secrets.token_bytes(_SECRET_BYTES)
        # stamps count from here, not from the clock's own zero: S need not tell the host's uptime
        self._epoch_ns = clock_ns()
        self._last_stamp_ns = -1
        self._spent: set[str] = set()
        # the same S, as a heap: S start with their issue stamp (fixed-width big-endian hex,
        # unique), so as strings they sort as they were issued, which is as they expire
        self._spent_by_expiry: list[str] = []
        # every S that expires at or before this is refused: the latest expiry forgotten
        self._void_through_ns = -1

    def issue(self) -> str:
        """A new nonce (32 lowercase hex characters, as :func:`is_nonce` wants), good for one
        :meth:`spend` until ``ttl_s`` from now."""
        # strictly increasing, so no two S are alike even where the clock is coarse
        stamp_ns = max(self._clock_ns() - self._epoch_ns, self._last_stamp_ns + 1)
        self._last_stamp_ns = stamp_ns
        stamp = stamp_ns.to_bytes(_STAMP_BYTES, "big")
        return (stamp + self._tag(stamp)).hex()

    @property
    def spent_kept(self) -> int:
        """How many spent S are kept now (at most ``max_spent``)."""
        return len(self._spent)

    def usable(self, nonce: str) -> bool:
        """True if ``nonce`` was issued here, has not expired and was not spent (nor voided by
        more than ``max_spent`` spent): a request that names it is worth reading and checking.
        Constant time in the MAC."""
        return self._expiry_if_usable(nonce, self._clock_ns()) is not None

    def spend(self, nonce: str) -> bool:
        """Let in the request that names ``nonce``, once its M was found right: True if
        :meth:`usable`, and from now on it is not (False for the second of two copies)."""
        now_ns = self._clock_ns()
        expiry_ns = self._expiry_if_usable(nonce, now_ns)
        if expiry_ns is None:
            return False
        heap = self._spent_by_expiry
        while heap and self._expiry_ns(heap[0]) <= now_ns:  # refused by their stamp alone now
            self._spent.discard(heapq.heappop(heap))
        self._spent.add(nonce)
        heapq.heappush(heap, nonce)
        if len(heap) > self._max_spent:  # forget the first to expire, and void all up to it
            forgotten = heapq.heappop(heap)
            self._spent.discard(forgotten)
            self._void_through_ns = max(self._void_through_ns, self._expiry_ns(forgotten))
        return True

    def _expiry_ns(self, nonce: str) -> int:
        return self._epoch_ns + int(nonce[:2 * _STAMP_BYTES], 16) + self._ttl_ns

    def _expiry_if_usable(self, nonce: str, now_ns: int) -> int | None:
        if not is_nonce(nonce):
            return None
        raw = bytes.fromhex(nonce)
        stamp, tag = raw[:_STAMP_BYTES], raw[_STAMP_BYTES:]
        if not hmac.compare_digest(self._tag(stamp), tag):
            return None
        expiry_ns = self._expiry_ns(nonce)
        if now_ns >= expiry_ns or expiry_ns <= self._void_through_ns or nonce in self._spent:
            return None
        return expiry_ns

    def _tag(self, stamp: bytes) -> bytes:
        message = b"livecam-server-nonce\n" + stamp
        return hmac.new(self._secret, message, hashlib.sha256).digest()[:_TAG_BYTES]

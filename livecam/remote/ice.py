"""ICE limited to configured interfaces (``advanced.serve.ice_interfaces``): media flows only
on the sides of the server the operator opened.

aiortc gathers its host candidates through aioice on every address of every interface
(loopback left out), so a server with a public and a private side offers both, and media may
flow on the side the operator meant to keep closed. It has no setting for that; the seam used
here is each peer connection's own ICE connection: between ``setRemoteDescription`` (which
makes the transports) and ``setLocalDescription`` (which gathers), :func:`limit_gathering`
hands it the allowed addresses in place of aioice's list. Nothing process-wide is changed:
the other connections of the process (the thin client's, tests') gather as before.

An entry of ``advanced.serve.ice_interfaces`` is an interface name (``eth0``, ``lo``), an address
(``192.168.1.20``) or a network (``10.0.0.0/8``, ``fd00::/8``). Naming loopback (``lo``,
``127.0.0.1``) makes its addresses candidates, which aioice otherwise never offers: a server
for this machine's clients only. IPv6 link-local addresses are never used (they need a scope
id that SDP candidates do not carry; aioice leaves them out too).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from typing import Any

from livecam.core.errors import ConfigError

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _parse(spec: Sequence[str]) -> tuple[set[str], list[Network]]:
    names: set[str] = set()
    networks: list[Network] = []
    for entry in spec:
        text = entry.strip()
        if not text:
            raise ConfigError("advanced.serve.ice_interfaces has an empty entry: give interface "
                              "names "
                              "(eth0), addresses (192.168.1.20) or networks (10.0.0.0/8)")
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            names.add(text)  # not an address: an interface name
    return names, networks


def _interfaces() -> list[tuple[str, list[str]]]:
    """(interface name, its addresses usable in candidates) for every interface here."""
    import ifaddr

    out = []
    for adapter in ifaddr.get_adapters():
        addresses = []
        for ip in adapter.ips:
            if isinstance(ip.ip, str):
                addresses.append(ip.ip)
            elif ip.ip[2] == 0:  # IPv6 with no scope id (link-local ones have one)
                addresses.append(ip.ip[0])
        out.append((str(adapter.nice_name), addresses))
    return out


def allowed_addresses(spec: Sequence[str]) -> list[str]:
    """This machine's addresses that ``spec`` (``advanced.serve.ice_interfaces``) allows, in
    interface order; read at each call (addresses come and go). :class:`ConfigError` for an empty
    entry."""
    names, networks = _parse(spec)
    allowed = []
    for name, addresses in _interfaces():
        for address in addresses:
            if name in names or any(ipaddress.ip_address(address) in n for n in networks):
                allowed.append(address)
    return allowed


def check_interfaces(spec: Sequence[str]) -> list[str]:
    """:func:`allowed_addresses`, or :class:`ConfigError` naming this machine's interfaces
    when none matches (a typo must not leave the server unreachable in silence)."""
    allowed = allowed_addresses(spec)
    if not allowed:
        here = "; ".join(f"{name} {' '.join(addresses) or '(no address)'}"
                         for name, addresses in _interfaces())
        raise ConfigError(f"advanced.serve.ice_interfaces {list(spec)} matches no address of this "
                          f"machine ({here}): name one of these interfaces, addresses or "
                          "networks, or leave it empty for all")
    return allowed


def limit_gathering(pc: Any, addresses: Sequence[str]) -> None:
    """Make ``pc`` (an aiortc ``RTCPeerConnection``) gather host candidates on ``addresses``
    only. Call after ``setRemoteDescription`` and before ``setLocalDescription``; event loop
    thread."""
    wanted = list(addresses)
    seen: set[int] = set()
    for transceiver in pc.getTransceivers():
        dtls = transceiver.sender.transport
        if dtls is None:
            continue
        connection = dtls.transport.iceGatherer._connection  # aioice.Connection
        if id(connection) in seen:  # one transport bundles every transceiver
            continue
        seen.add(id(connection))
        gather = connection.get_component_candidates

        async def limited(component: int, addresses: list[str], timeout: int = 5,
                          _gather: Any = gather) -> Any:
            return await _gather(component=component, addresses=wanted, timeout=timeout)

        connection.get_component_candidates = limited

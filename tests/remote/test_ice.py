"""ICE limited to ``serve.ice_interfaces``: this machine's real interfaces (ifaddr), real
aiortc peer connections (their answers' candidates), and `livecam serve` limited to loopback
with a real aiortc client getting swapped frames back over it."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.core.errors import ConfigError
from livecam.remote.ice import allowed_addresses, check_interfaces, limit_gathering
from tests.helpers.whip_session import start_serve
from tests.remote.conftest import first_swapped

_CANDIDATE = re.compile(r"^a=candidate:\S+ \d+ udp \d+ (\S+) \d+ typ host", re.MULTILINE)


def _host_candidates(sdp: str) -> set[str]:
    return set(_CANDIDATE.findall(sdp))


def test_entries_are_interface_names_addresses_or_networks() -> None:
    assert "127.0.0.1" in allowed_addresses(["lo"])
    assert allowed_addresses(["127.0.0.1"]) == ["127.0.0.1"]
    assert "127.0.0.1" in allowed_addresses(["127.0.0.0/8"])
    assert allowed_addresses(["no-such-interface", "203.0.113.0/24"]) == []
    with pytest.raises(ConfigError, match=r"matches no address of this machine \(.*lo 127"):
        check_interfaces(["no-such-interface"])
    with pytest.raises(ConfigError, match="empty entry"):
        allowed_addresses([" "])


async def _answer(limit: list[str] | None) -> str:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    offerer, answerer = RTCPeerConnection(), RTCPeerConnection()
    try:
        offerer.addTransceiver("video", direction="sendrecv")
        offerer.addTransceiver("audio", direction="sendrecv")
        await offerer.setLocalDescription(await offerer.createOffer())
        await answerer.setRemoteDescription(RTCSessionDescription(
            sdp=offerer.localDescription.sdp, type="offer"))
        if limit is not None:
            limit_gathering(answerer, limit)
        await answerer.setLocalDescription(await answerer.createAnswer())
        return str(answerer.localDescription.sdp)
    finally:
        await offerer.close()
        await answerer.close()


def test_an_answer_offers_host_candidates_on_the_allowed_addresses_only() -> None:
    everywhere = _host_candidates(asyncio.run(_answer(None)))
    assert "127.0.0.1" not in everywhere  # aiortc's own choice leaves loopback out
    assert _host_candidates(asyncio.run(_answer(["127.0.0.1"]))) == {"127.0.0.1"}
    others = [a for a in allowed_addresses(["0.0.0.0/0", "::/0"]) if a not in ("127.0.0.1", "::1")]
    if len(others) < 2:
        pytest.skip(f"this machine has {len(others)} non-loopback address(es): nothing to "
                    "leave out")
    assert everywhere >= set(others)
    assert _host_candidates(asyncio.run(_answer(others[:1]))) == {others[0]}


@pytest.mark.slow
def test_serve_limited_to_loopback_swaps_over_it_and_a_typo_stops_the_start(
        tmp_path: Path) -> None:
    server = start_serve(tmp_path / "serve", max_sessions=1,
                          settings=("advanced.serve.ice_interfaces=[lo]",))
    try:
        answer = asyncio.run(first_swapped(server))
        assert _host_candidates(answer) <= {"127.0.0.1", "::1"} and _host_candidates(answer)
        assert "ICE on 127.0.0.1" in server.log.read_text()
    finally:
        server.stop()
    done = subprocess.run(
        [sys.executable, "-m", "livecam.cli", "serve", "--set",
         "advanced.serve.ice_interfaces=[eht0]", "--set", "control.api=false"],
        env=server.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "livecam: error:" in line]
    assert len(lines) == 1 and "serve.ice_interfaces ['eht0'] matches no address" in lines[0]

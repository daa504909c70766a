"""Helpers of the remote tests. The set-up itself (`livecam serve` as a user starts it, real
aiortc sessions with it) is :mod:`tests.helpers.whip_session`, shared with
``scripts/bench_remote.py``."""

from __future__ import annotations

from typing import Any

from tests.helpers.whip_session import Server, looped_session


async def first_swapped(server: Server, *, trust: Any = None, user: str = "alice") -> str:
    """A real aiortc WHIP session with ``server`` sending the leak clip ``still_2`` at 30 fps
    until the first swapped frame (one carrying its index) comes back; the answer's SDP.
    ``trust``: the client's SSL context (None: the system's CAs). Raises what the client
    raises (:class:`WhipError` for a refusal)."""
    from tests.helpers.leak_clips import leak_clips, read_index

    frames = [frame for frame, _ in leak_clips()["still_2"].frames()][:30]
    async with looped_session(server.url, server.tokens[user], frames, ssl=trust) as client:
        while True:
            image = await client.received(timeout_s=60)
            assert image is not None, "the server ended the video"
            if read_index(image) is not None:
                return client.answer_sdp

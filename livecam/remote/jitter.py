"""Received video frames completed at their last packet, not one frame later.

aiortc's receiver puts each RTP packet in a jitter buffer that hands a frame to the decoder
only when a packet of the *next* frame (another RTP timestamp) arrives: every received frame
waits one frame interval (33 ms at 30 fps) for no reason, once per leg, so twice on a
session's round trip. The sender marks a frame's last packet (the RTP marker bit, RFC 3550;
aiortc's sender, browsers and OBS set it, and RFC 6184 and RFC 7741 require it for H.264 and
VP8), so a frame whose packets are all in, from the first after the previous frame to the
marked one, is complete at once. :class:`MarkerJitterBuffer` hands it over then; a frame of a
sender that marks nothing still completes at the next frame, as in aiortc. A missing packet
holds its frame until retransmission (NACK) fills it, as in aiortc.

aiortc has no setting for this: :func:`complete_frames_at_marker` gives one peer
connection's video receivers this buffer (nothing process-wide is patched), before any
packet arrives.
"""

from __future__ import annotations

import logging
from typing import Any

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

log = logging.getLogger(__name__)

#: aiortc's own size for a video receiver's buffer (packets; a power of 2).
VIDEO_CAPACITY = 512
#: Where aiortc keeps a receiver's buffer (a name-mangled private attribute of
#: ``RTCRtpReceiver``; aiortc 1.x, pinned ``<2`` in pyproject).
_BUFFER_ATTRIBUTE = "_RTCRtpReceiver__jitter_buffer"


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video :class:`~aiortc.jitterbuffer.JitterBuffer` that also completes a frame
    at its marked last packet. ``add`` returns (send a keyframe request, the frame completed
    by this packet or None), as aiortc's does; one thread (the event loop)."""

    def __init__(self, capacity: int = VIDEO_CAPACITY) -> None:
        super().__init__(capacity=capacity, is_video=True)

    def _remove_frame(self, sequence_number: int) -> JitterFrame | None:
        packets: list[RtpPacket] = []
        timestamp: int | None = None
        origin = self._origin
        assert origin is not None  # set by the first ``add``
        for count in range(self.capacity):
            packet = self._packets[(origin + count) % self.capacity]
            if packet is None:
                return None  # a gap: the frame waits for the missing packet
            if timestamp is None:
                timestamp = packet.timestamp
            elif packet.timestamp != timestamp:  # the next frame began: no marker was seen
                self.remove(count)
                return _frame(packets, timestamp)
            packets.append(packet)
            if packet.marker:
                self.remove(count + 1)
                return _frame(packets, timestamp)
        return None


def _frame(packets: list[RtpPacket], timestamp: int) -> JitterFrame:
    # aiortc's receiver puts each packet's depayloaded bytes in ``_data``
    return JitterFrame(data=b"".join(p._data for p in packets),  # type: ignore[attr-defined]
                       timestamp=timestamp)


def complete_frames_at_marker(pc: Any) -> int:
    """Give each video receiver of ``pc`` (an ``RTCPeerConnection``, its transceivers made:
    after ``addTransceiver`` or ``setRemoteDescription``, before media flows) a
    :class:`MarkerJitterBuffer`. Returns how many receivers got one; one that does not keep
    its buffer where aiortc 1.16 does keeps aiortc's (logged), which only costs the frame."""
    done = 0
    for transceiver in pc.getTransceivers():
        receiver = transceiver.receiver
        if transceiver.kind != "video" or receiver is None:
            continue
        if not isinstance(getattr(receiver, _BUFFER_ATTRIBUTE, None), JitterBuffer):
            log.warning("this aiortc keeps no jitter buffer where 1.16 did: received frames "
                        "complete one frame late")
            continue
        setattr(receiver, _BUFFER_ATTRIBUTE, MarkerJitterBuffer())
        done += 1
    return done

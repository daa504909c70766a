"""Received frames complete at their marked last packet (:mod:`livecam.remote.jitter`), not
when the next frame's first packet arrives: RTP packets as aiortc's sender makes them from
x264's frames of the leak clip, and a real `livecam serve` session that gets one camera
frame only."""

from __future__ import annotations

import asyncio
import fractions
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
from aiortc.codecs.h264 import H264Encoder, h264_depayload
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from livecam.remote.client import FrameFeed, WhipClient
from livecam.remote.encoding import H264PacketEncoder, to_video_frame
from livecam.remote.jitter import MarkerJitterBuffer
from tests.helpers.leak_clips import leak_clips, read_index
from tests.helpers.whip_session import Server, start_serve


def _rtp_frames(count: int) -> list[list[RtpPacket]]:
    """The leak clip's first ``count`` frames, x264-coded as a session sends them, each as
    the RTP packets aiortc's sender makes (the last one marked), depayloaded as aiortc's
    receiver does."""
    encoder, packetizer = H264PacketEncoder(), H264Encoder()
    frames: list[list[RtpPacket]] = []
    sequence = 1000
    for k, (image, _) in zip(range(count), leak_clips()["still_2"].frames(), strict=False):
        frame = to_video_frame(image)
        frame.pts, frame.time_base = k * 3000, fractions.Fraction(1, 90_000)
        payloads, timestamp = packetizer.pack(encoder.encode(frame))
        packets = []
        for i, payload in enumerate(payloads):
            packet = RtpPacket(payload_type=102, marker=int(i == len(payloads) - 1),
                               sequence_number=sequence, timestamp=timestamp, payload=payload)
            packet._data = h264_depayload(payload)  # type: ignore[attr-defined]
            packets.append(packet)
            sequence += 1
        frames.append(packets)
    return frames


def _decoded_index(data: bytes, decoder: av.CodecContext) -> int | None:
    (picture,) = decoder.decode(av.Packet(data))
    return read_index(picture.to_ndarray(format="bgr24"))


def test_a_frame_completes_at_its_marked_last_packet() -> None:
    frames = _rtp_frames(3)
    assert len(frames[0]) > 1  # a 720p keyframe: several packets
    ours, aiortcs = MarkerJitterBuffer(), JitterBuffer(capacity=512, is_video=True)
    decoder = av.CodecContext.create("h264", "r")
    for k, packets in enumerate(frames):
        for packet in packets[:-1]:
            assert ours.add(packet)[1] is None  # not complete before its last packet
        done = ours.add(packets[-1])[1]
        assert done is not None and done.timestamp == packets[0].timestamp
        assert _decoded_index(done.data, decoder) == k  # the whole frame, this one
    # aiortc's own buffer hands a frame over only when the next one's first packet comes
    for packet in frames[0]:
        assert aiortcs.add(packet)[1] is None
    assert aiortcs.add(frames[1][0])[1] is not None


def test_a_missing_packet_holds_its_frame_until_it_comes() -> None:
    first, second = _rtp_frames(2)
    buffer = MarkerJitterBuffer()
    decoder = av.CodecContext.create("h264", "r")
    for packet in first[:1] + first[2:]:  # the second packet lost
        assert buffer.add(packet)[1] is None
    done = buffer.add(first[1])[1]  # retransmitted
    assert done is not None and _decoded_index(done.data, decoder) == 0
    for packet in second[:-1]:
        assert buffer.add(packet)[1] is None
    done = buffer.add(second[-1])[1]
    assert done is not None and _decoded_index(done.data, decoder) == 1


def test_a_sender_that_marks_nothing_still_gets_its_frames_one_frame_late() -> None:
    first, second = _rtp_frames(2)
    for packet in first + second:
        packet.marker = 0
    buffer = MarkerJitterBuffer()
    decoder = av.CodecContext.create("h264", "r")
    for packet in first:
        assert buffer.add(packet)[1] is None
    done = buffer.add(second[0])[1]  # the next frame began: the first is complete
    assert done is not None and _decoded_index(done.data, decoder) == 0


@pytest.fixture(scope="module")
def passthrough(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_serve(Path(tmp_path_factory.mktemp("serve")), max_sessions=1, identity=None)
    yield s
    s.stop()


@pytest.mark.slow
def test_one_camera_frame_comes_back_without_a_next_frame_behind_it(
        passthrough: Server) -> None:
    # at 0.01 fps the client repeats its frame after 150 s: the server gets one frame, and
    # each end's receiver has no next frame to complete the one it has; with aiortc's
    # buffer the server never had a camera frame and ended the session (None came back)
    image, _ = next(leak_clips()["still_2"].frames())
    feed = FrameFeed(fps=0.01)
    feed.put(image)

    async def run() -> np.ndarray | None:
        client = WhipClient(passthrough.url, passthrough.tokens["alice"], feed)
        try:
            await client.connect()
            return await client.received(timeout_s=60)
        finally:
            await client.close()

    back = asyncio.run(run())
    assert back is not None and read_index(back) == 0
    assert feed.repeats == 0  # the one frame, never sent again

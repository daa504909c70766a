"""H.264 for WebRTC sessions at a fraction of the CPU of aiortc's own H.264 encoder.

Both ends of a session (the thin client's camera going up, the swapped video coming back)
prefer H.264 when the other end takes it (:func:`prefer_h264`), and then send it encoded
here: x264's ``ultrafast`` preset, ``zerolatency`` (no frame held back), baseline profile,
handed to aiortc as ``av.Packet`` through its pre-encoded path (a track may return packets,
which aiortc's sender only packetizes, as it does for a ``MediaPlayer`` opened with
``decode=False``). aiortc's own ``H264Encoder`` uses x264's default preset (``medium``) and
has no setting for it: 22 ms of CPU per 720p frame here, against 3.3 ms for this one and
6.4 ms for aiortc's VP8. A client that offers VP8 only (any plain WHIP client) still gets
VP8, encoded by aiortc as before.

What aiortc's pre-encoded path does not do, this encoder does for itself: a receiver's
keyframe request (PLI) and bitrate estimate (REMB) do not reach it, so it refreshes the
picture continuously (x264's periodic intra refresh: every part of the picture is coded
afresh within :data:`REFRESH_EVERY_S`, with no keyframe spike) and holds a fixed
:data:`BITRATE_BPS`. A loss that retransmission (NACK) does not repair shows for at most
that long.
"""

from __future__ import annotations

import fractions
from typing import Any

from livecam.core.types import ImageBGR, ImageI420

#: The video bitrate (bits/s) of an H.264 session, each way: aiortc's VP8 starting rate. On
#: the noisy 720p test clip x264 ``ultrafast`` at 1 Mbit/s decoded nearer the picture sent
#: (mean error 2.25 grey levels) than aiortc's VP8 at 1, 2 or 3 Mbit/s (2.50, 2.33, 2.33);
#: 2 Mbit/s cost the thin client 1.2-1.6 ms more CPU per frame (more packets both ways).
BITRATE_BPS = 1_000_000
#: Every part of the picture is coded afresh within this many seconds (intra refresh).
REFRESH_EVERY_S = 1.0
#: Rate control counts at least this many frames a second. x264 grows its VBV buffer to one
#: frame's share of the bitrate at least: at 1 fps a frame could be 125 KB, at 0.01 fps
#: 330-650 KB, about 100-500 packets sent at once, which overflowed the receiving socket's
#: buffer (212 KB by default on Linux) and lost the frame's tail, which no retransmission
#: request repairs while no next frame follows. At 10 a frame is at most the VBV buffer
#: (half a second of the bitrate: 62.5 KB, about 50 packets), whatever the camera's rate.
RATE_FPS_FLOOR = 10.0
#: The H.264 that aiortc offers and both ends agree on: constrained baseline, level 3.1
#: (up to 1280x720 at 30 fps), packetization mode 1.
H264_PROFILE_LEVEL_ID = "42e01f"


def to_video_frame(image_bgr: ImageBGR, planes_i420: ImageI420 | None = None) -> Any:
    """``image_bgr`` as the ``av.VideoFrame`` an encoder takes: the I420 planes it was
    decoded from where ``planes_i420`` gives them (of its size: the source's own picture,
    with no conversion), else yuv420p converted by OpenCV
    (BT.601, limited range, as FFmpeg's default), so aiortc's encoder converts nothing. A
    camera frame goes through this once; FFmpeg's own BGR conversion (what aiortc did) cost
    2.5 times OpenCV's here at 720p (3.0 against 1.2 ms) and shifted colours by 1-3 grey
    levels more after a round trip. The frame's planes are OpenCV's output array itself
    (``from_numpy_buffer``, which keeps the array alive with the frame): copying them into a
    frame of FFmpeg's own (``from_ndarray``) cost 0.33 ms per 720p frame, holding the GIL.
    Both encoders copy a frame's planes into their own buffers when they take it. An odd
    width or height (no 4:2:0 layout) goes as BGR."""
    import cv2
    import numpy as np
    from av import VideoFrame

    h, w = image_bgr.shape[:2]
    if h % 2 or w % 2:
        return VideoFrame.from_ndarray(image_bgr, format="bgr24")
    planes = planes_i420
    if planes is None or planes.shape != (h * 3 // 2, w):
        planes = np.asarray(cv2.cvtColor(image_bgr, cv2.COLOR_BGR2YUV_I420), np.uint8)
    if h % 4:  # PyAV reads the height of a planes array as a multiple of 4
        return VideoFrame.from_ndarray(planes, format="yuv420p")
    return VideoFrame.from_numpy_buffer(planes, format="yuv420p")


def prefer_h264(transceiver: Any) -> None:
    """Order ``transceiver``'s codecs (aiortc's public ``setCodecPreferences``, before the
    offer or answer) as H.264 constrained baseline first, then aiortc's other video codecs
    (VP8, the other H.264 profile) and RTX: an answerer takes the first codec it shares."""
    from aiortc import RTCRtpSender

    codecs = RTCRtpSender.getCapabilities("video").codecs

    def rank(codec: Any) -> int:
        if codec.mimeType.lower() == "video/h264" and (
                codec.parameters.get("profile-level-id") == H264_PROFILE_LEVEL_ID):
            return 0
        return 1 if codec.mimeType.lower() != "video/rtx" else 2

    transceiver.setCodecPreferences(sorted(codecs, key=rank))


def sent_codec(sdp: str) -> str:
    """The video codec a session sends, from its answer ``sdp`` (what both ends use: the
    answer's first video codec): ``"H264"``, ``"VP8"``, … ; ``""`` when there is no video."""
    from aiortc.sdp import SessionDescription

    for media in SessionDescription.parse(sdp).media:
        if media.kind == "video" and media.rtp.codecs:
            return str(media.rtp.codecs[0].name)
    return ""


class H264PacketEncoder:
    """yuv420p ``av.VideoFrame`` in, one ``av.Packet`` (Annex B) out, stamped with the
    frame's own ``pts`` and ``time_base``. Made on the first frame's size and made again
    when the size changes. One thread at a time (aiortc's sender calls its track's ``recv``
    on the event loop)."""

    def __init__(self, *, fps: float = 30.0, bitrate_bps: int = BITRATE_BPS) -> None:
        self._fps = fps
        self._bitrate_bps = bitrate_bps
        self._codec: Any = None

    def _open(self, width: int, height: int) -> Any:
        import av

        codec = av.CodecContext.create("libx264", "w")
        codec.width, codec.height, codec.pix_fmt = width, height, "yuv420p"
        codec.bit_rate = self._bitrate_bps
        codec.framerate = fractions.Fraction(round(max(self._fps, RATE_FPS_FLOOR) * 1000), 1000)
        codec.time_base = fractions.Fraction(1, 90_000)
        kbps = self._bitrate_bps // 1000
        refresh = max(2, round(REFRESH_EVERY_S * self._fps))
        codec.options = {"preset": "ultrafast", "tune": "zerolatency", "profile": "baseline",
                         "level": "31",
                         "x264-params": f"keyint={refresh}:intra-refresh=1:"
                                        f"vbv-maxrate={kbps}:vbv-bufsize={kbps // 2}"}
        codec.thread_count = 1  # one frame at a time: x264's threads would add latency
        return codec

    def encode(self, frame: Any) -> Any:
        """The packet for ``frame`` (converted to yuv420p first if it is not), or None when
        x264 gave none (it does not, with ``zerolatency``)."""
        import av

        if frame.format.name != "yuv420p":
            frame = frame.reformat(format="yuv420p")
        if self._codec is None or (self._codec.width, self._codec.height) != (
                frame.width, frame.height):
            self._codec = self._open(frame.width, frame.height)
        frame.pict_type = av.video.frame.PictureType.NONE
        data = b"".join(bytes(p) for p in self._codec.encode(frame))
        if not data:
            return None
        packet = av.Packet(data)
        packet.pts, packet.time_base = frame.pts, frame.time_base
        return packet

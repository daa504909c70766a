"""Network video outputs through PyAV (FFmpeg): ``rtmp://`` (FLV), ``srt://`` and ``udp://``
(MPEG-TS). Not ``rtsp://``: FFmpeg's RTSP muxer takes no write timeout behind the fifo (below),
so a hung RTSP server could hold the run's end for ever.

Frames are H.264 (x264, ``zerolatency``: no frame held back) with a keyframe every second, so a
viewer that joins or a link that comes back waits at most a second for a picture. The muxer
runs behind FFmpeg's ``fifo`` muxer: writing to the network happens on FFmpeg's own thread, so
a slow or dead server never blocks the output thread (PyAV opens an output's connection
holding the GIL and without a timeout, which would freeze the whole process); a full queue
drops packets and restarts at the next keyframe; a lost connection is reopened every second,
for as long as the run lasts.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from fractions import Fraction
from typing import Any
from urllib.parse import urlsplit

from livecam.core.errors import OutputError
from livecam.core.netstreams import missing_protocol, protocol_available, split_url
from livecam.core.types import ImageBGR

log = logging.getLogger(__name__)

#: URL schemes ``--output`` writes through FFmpeg, with the muxer each carries
OUTPUT_MUXERS = {"rtmp": "flv", "rtmps": "flv", "srt": "mpegts", "udp": "mpegts"}

#: the port a server listens on when the URL names none
_DEFAULT_PORTS = {"rtmp": 1935, "rtmps": 443}

#: seconds between keyframes: the longest a joining viewer waits for a picture
KEYFRAME_INTERVAL_S = 1.0

#: packets queued for the network thread (about two seconds at 30 fps) before some are dropped
_QUEUE_PACKETS = 60


class NetworkSink:
    """Encodes frames as H.264 and sends them to ``url`` (see the module docstring).

    ``open`` checks what it can in at most ``timeout_s``: that this FFmpeg has the protocol
    and, for an RTMP server (reached over TCP), that it accepts a connection; it
    raises :class:`OutputError` with one line otherwise. After that, the network never makes
    ``send`` wait: the connection is made, lost and made again on FFmpeg's thread, and frames
    sent while it is down are dropped. ``timeout_s`` also bounds each network write and the
    wait for the queue to drain at ``close``. Only the output thread calls these methods.
    """

    def __init__(self, *, url: str, bitrate_kbps: int, timeout_s: float,
                 codec: str = "libx264") -> None:
        self._url = split_url(url)
        self._bitrate_kbps = bitrate_kbps
        self._timeout_s = timeout_s
        self._codec = codec
        self._container: Any = None
        self._stream: Any = None

    def open(self, *, width: int, height: int, fps: float) -> None:
        import av

        url = self._url
        if width % 2 or height % 2:
            raise OutputError(f"output {url.shown} needs an even size for H.264, got "
                              f"{width}x{height}: set output.width/output.height")
        if url.listen and url.scheme not in ("srt", "udp"):  # rtmp ?listen=1
            raise OutputError(f"output {url.shown}: livecam sends to a server; listener mode "
                              "is for inputs (use srt://…?mode=listener, or an RTMP server "
                              "such as MediaMTX or nginx-rtmp)")
        if not protocol_available(url.scheme):
            raise OutputError(f"output {url.shown}: {missing_protocol(url.scheme)}")
        self._check_server()
        target = url.url
        if url.scheme == "udp" and "pkt_size" not in urlsplit(target).query:
            # 7 MPEG-TS packets per datagram: under any Ethernet MTU, what players expect
            target += ("&" if "?" in target else "?") + "pkt_size=1316"
        timeout_us = str(round(self._timeout_s * 1e6))
        fifo = {"fifo_format": OUTPUT_MUXERS[url.scheme], "queue_size": str(_QUEUE_PACKETS),
                "drop_pkts_on_overflow": "1", "restart_with_keyframe": "1",
                "attempt_recovery": "1", "recovery_wait_time": "1",
                "max_recovery_attempts": "0",
                # protocol options for the real output's connection: bound every write
                "format_opts": f"rw_timeout={timeout_us}"}
        try:
            self._container = av.open(target, mode="w", format="fifo", container_options=fifo)
            stream = self._container.add_stream(self._codec,
                                                rate=Fraction(fps).limit_denominator(1001))
        except (av.FFmpegError, ValueError, OSError) as exc:
            self.close()
            raise OutputError(f"output {url.shown} cannot be opened: {exc}") from None
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        kbps = self._bitrate_kbps
        if self._codec in ("libx264", "libx265"):
            stream.options = {"preset": "veryfast", "tune": "zerolatency",
                              "g": str(max(1, round(KEYFRAME_INTERVAL_S * fps))),
                              "b": f"{kbps}k", "maxrate": f"{kbps}k", "bufsize": f"{kbps}k"}
        else:
            stream.bit_rate = kbps * 1000
        self._stream = stream
        log.info("output %s: %dx%d at %g fps, %s %d kbit/s", url.shown, width, height, fps,
                 self._codec, kbps)

    def _check_server(self) -> None:
        """A server reached over TCP must accept a connection within ``timeout_s``."""
        url = self._url
        port = _DEFAULT_PORTS.get(url.scheme)
        if port is None:
            return  # UDP has nobody to ask; SRT's handshake happens on FFmpeg's thread
        parts = urlsplit(url.url)
        host, port = parts.hostname or "", parts.port or port
        try:
            with socket.create_connection((host, port), timeout=self._timeout_s):
                pass
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise OutputError(f"output {url.shown}: the server at {host}:{port} cannot be "
                              f"reached ({reason}): check the URL and that the server runs"
                              ) from None

    def send(self, image_bgr: ImageBGR) -> None:
        import av

        frame = av.VideoFrame.from_ndarray(image_bgr, format="bgr24")
        try:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        except (av.FFmpegError, OSError) as exc:  # the fifo's thread failed for good
            raise OutputError(f"output {self._url.shown} failed: {exc}") from None

    def close(self) -> None:
        """Flush the encoder and close; the network thread gets ``timeout_s`` per write to
        send what is queued. Idempotent; errors are logged, not raised (the stream is gone)."""
        import av

        container, self._container = self._container, None
        stream, self._stream = self._stream, None
        if container is None:
            return
        try:
            if stream is not None:
                for packet in stream.encode(None):
                    container.mux(packet)
        except (av.FFmpegError, OSError) as exc:
            log.warning("output %s: flushing failed: %s", self._url.shown, exc)
        finally:
            with contextlib.suppress(av.FFmpegError, OSError):
                container.close()

"""Network stream URLs for PyAV (FFmpeg), shared by network inputs and outputs.

The URL is the one a user would give ffmpeg or OBS. Listener mode (livecam waits for the other
side to connect) is asked for in the URL: ``?listen=1`` for RTMP and RTSP (FFmpeg's ``-listen
1`` / ``-rtsp_flags listen``, taken out of the URL before it is opened), SRT's own
``?mode=listener``; a ``udp://`` input always receives on the local port it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


@dataclass(frozen=True)
class NetworkURL:
    """``url`` split into what FFmpeg opens and the options it needs (``listen``: livecam
    waits for a sender rather than calling a server)."""

    url: str
    options: dict[str, str]
    listen: bool

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0].lower()

    @property
    def shown(self) -> str:
        """The URL for messages: without a password, an SRT passphrase or an RTMP stream key
        (the last part of the path, which lets anyone stream as the account)."""
        parts = urlsplit(self.url)
        netloc = parts.hostname or ""
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
        path = parts.path
        if self.scheme.startswith("rtmp") and path.count("/") >= 2:
            path = path.rsplit("/", 1)[0] + "/***"
        query = [(k, "***" if k in ("passphrase", "password") else v)
                 for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        return urlunsplit((parts.scheme, netloc, path, urlencode(query, safe="*"), ""))


def split_url(url: str) -> NetworkURL:
    """Split listener requests out of ``url`` (see the module's docstring)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "srt":
        listen = dict(parse_qsl(parts.query)).get("mode") == "listener"
        return NetworkURL(url, {}, listen)
    if scheme not in ("rtmp", "rtmps", "rtsp"):
        return NetworkURL(url, {}, scheme == "udp")
    query = parse_qsl(parts.query, keep_blank_values=True)
    listen = any(k == "listen" and v not in ("0", "") for k, v in query)
    rest = urlencode([(k, v) for k, v in query if k != "listen"])
    plain = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment))
    if not listen:
        return NetworkURL(plain, {}, False)
    options = {"rtsp_flags": "listen"} if scheme == "rtsp" else {"listen": "1"}
    return NetworkURL(plain, options, True)


def url_problem(url: str) -> str | None:
    """What is missing from a network URL (None when its shape is right): a host or port,
    and for RTMP the application and stream key (``rtmp://HOST[:PORT]/APP/KEY``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return str(exc)
    scheme = parts.scheme.lower()
    if not parts.hostname and port is None:
        return f"it names no host or port ({scheme}://HOST:PORT)"
    if scheme.startswith("rtmp") and not parts.path.strip("/"):
        return f"RTMP needs the application and stream key: {scheme}://HOST[:PORT]/APP/KEY"
    return None


def ffmpeg_reason(exc: BaseException) -> str:
    """FFmpeg's reason without the errno and the URL PyAV appends."""
    reason = getattr(exc, "strerror", None) or str(exc)
    return str(reason).rstrip(".")


def missing_protocol(scheme: str) -> str:
    """What to do when this FFmpeg build has no ``scheme`` protocol."""
    return (f"this PyAV build's FFmpeg has no {scheme}:// protocol (PyPI's av wheels are built "
            "without libsrt); install a PyAV built against an FFmpeg with it, or use another "
            "protocol (rtmp://, rtsp://, udp://)")


def protocol_available(scheme: str) -> bool:
    """Whether this PyAV's FFmpeg has the ``scheme://`` protocol (PyPI's wheels have no SRT).
    Contacts nothing: an address FFmpeg refuses before any network call."""
    import av

    try:
        av.open(f"{scheme}://", mode="r", timeout=0.01).close()
    except av.ProtocolNotFoundError:
        return False
    except (av.FFmpegError, OSError, ValueError):
        pass
    return True

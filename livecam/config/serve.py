"""Config section ``serve``: ``livecam serve``, the WHIP (RFC 9725) endpoint that takes remote
cameras over WebRTC and sends the swapped video back (:mod:`livecam.remote`)."""

from __future__ import annotations

from dataclasses import dataclass

from livecam.config.fields import knob


@dataclass(frozen=True)
class ServeConfig:
    """`livecam serve`: address, TLS, users' tokens and the limits checked at offer time."""

    address: str = knob(
        "127.0.0.1:8780", "HOST:PORT the WHIP endpoint listens on (POST /whip). Plain HTTP "
        "only on loopback: any other address needs tls_cert and tls_key.")
    tls_cert: str = knob("", "PEM certificate (chain) for HTTPS; empty = plain HTTP "
                         "(loopback only).")
    tls_key: str = knob("", "PEM private key of tls_cert.")
    tokens_file: str = knob(
        "", "File holding the users' WHIP tokens as sha256 hashes (mode 0600, `livecam serve "
        "token add NAME` prints a new token once); empty = `serve-tokens.json` in the user "
        "config dir.")
    ice_interfaces: tuple[str, ...] = knob(
        (), "Where WebRTC media may flow: ICE host candidates only on these interface names "
        "(eth0), addresses (192.168.1.20) or networks (10.0.0.0/8); naming loopback (lo) "
        "makes it a candidate. Empty = every interface but loopback (aiortc's own choice). "
        "One that matches no address here stops the start.")
    max_sessions: int = knob(
        4, "Sessions at once; an offer past it is refused with 503 and the reason. On a CUDA "
        "GPU the one GPU pipeline is built for this many streams.", range=(1, 64))
    max_width_px: int = knob(1280, "Widest camera frame a session may send (px); a wider one "
                             "is refused at the offer when the SDP says so, else the session "
                             "ends at its first frame with the reason.", range=(16, 7680))
    max_height_px: int = knob(720, "Tallest camera frame a session may send (px).",
                              range=(16, 4320))
    max_fps: float = knob(30.0, "Highest frame rate a session may declare "
                          "(a=framerate in its offer).", range=(1.0, 240.0))
    max_offers_per_s: float = knob(
        20.0, "Offers accepted per second over all users (a flood past it gets 429).",
        range=(0.1, 10000.0))
    first_frame_timeout_s: float = knob(
        15.0, "A session whose first video frame does not arrive in this time is closed.",
        range=(1.0, 600.0))
    max_photo_bytes: int = knob(
        10_000_000, "Largest photo a session may upload as its identity (POST /whip/ID/photo, "
        "`livecam run --remote URL --source PHOTO`), bytes; a larger one gets 413.",
        range=(1000, 100_000_000))
    photo_dir: str = knob(
        "", "Folder where the server keeps the photos sessions upload, one folder per session "
        "that it removes when the session ends; empty = `serve-photos` in the user cache dir.")
    photo_keep_s: float = knob(
        600.0, "How long the server keeps a user's uploaded photo (its identity, in memory) "
        "after the session that used it ends, so a reconnecting client sends its hash instead "
        "of the bytes; 0 = not kept, every session uploads again.", range=(0.0, 86400.0))

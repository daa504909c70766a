"""H.264 for sessions (:mod:`livecam.remote.encoding`): the WHIP client's offer puts H.264
constrained baseline first (VP8 still offered), and the packets this encoder hands aiortc
decode, with FFmpeg's decoder as aiortc's receiver uses it, to the picture sent; a receiver
that missed the stream's start (a loss nothing repaired) has the whole picture again within
``REFRESH_EVERY_S``, without a keyframe spike. Real frames (the leak clip ``still_2``)."""

from __future__ import annotations

import asyncio
import fractions
from pathlib import Path

import av
import numpy as np
from aiohttp import web

from livecam.remote.client import FrameFeed, WhipClient, WhipError
from livecam.remote.encoding import (
    BITRATE_BPS,
    REFRESH_EVERY_S,
    H264PacketEncoder,
    sent_codec,
    to_video_frame,
)
from tests.helpers.leak_clips import leak_clips


def test_the_offer_puts_h264_baseline_first_and_still_offers_vp8() -> None:
    async def offer() -> str:
        offers: list[str] = []

        async def whip(request: web.Request) -> web.Response:
            offers.append(await request.text())
            return web.Response(status=503, text="full")

        app = web.Application()
        app.router.add_post("/whip", whip)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            client = WhipClient(f"http://127.0.0.1:{port}/whip", "t", FrameFeed(fps=30))
            try:
                await client.connect()
            except WhipError as exc:
                assert exc.status == 503
        finally:
            await runner.cleanup()
        return offers[0]

    sdp = asyncio.run(offer())
    assert sent_codec(sdp) == "H264"  # the offer's first video codec: what an answer takes
    rtpmaps = [line for line in sdp.splitlines() if line.startswith("a=rtpmap:")]
    first_pt = rtpmaps[0].split()[0].removeprefix("a=rtpmap:")
    assert f"a=fmtp:{first_pt} " in sdp and "profile-level-id=42e01f" in sdp.split(
        f"a=fmtp:{first_pt} ")[1].splitlines()[0]
    assert any("VP8/90000" in line for line in rtpmaps)  # a VP8-only server still answers


def _frames(n: int) -> list[np.ndarray]:
    frames = [frame for frame, _ in leak_clips()["still_2"].frames()]
    return [frames[k % len(frames)] for k in range(n)]


def _encode(images: list[np.ndarray], fps: float = 30.0,
            planes: list[np.ndarray] | None = None) -> list[object]:
    encoder = H264PacketEncoder(fps=fps)
    packets = []
    for k, image in enumerate(images):
        frame = to_video_frame(image, None if planes is None else planes[k])
        frame.pts, frame.time_base = round(k * 90_000 / fps), fractions.Fraction(1, 90_000)
        packet = encoder.encode(frame)
        assert packet is not None  # zerolatency: one packet per frame, none held back
        assert packet.pts == frame.pts
        packets.append(packet)
    return packets


def _decode(packets: list[object]) -> list[np.ndarray]:
    from aiortc.codecs import H264Decoder
    from aiortc.jitterbuffer import JitterFrame

    decoder = H264Decoder()  # what aiortc's receiver decodes an H.264 session with
    images = []
    for packet in packets:
        jitter_frame = JitterFrame(data=bytes(packet), timestamp=int(packet.pts))
        try:
            frames = decoder.decode(jitter_frame)
        except av.FFmpegError:  # as aiortc's receiver: logged, the decoder kept
            continue
        images += [f.to_ndarray(format="bgr24") for f in frames]
    return images


def test_h264_packets_decode_to_the_picture_sent() -> None:
    images = _frames(30)
    decoded = _decode(_encode(images))
    assert len(decoded) == len(images)
    errors = [np.abs(d.astype(np.int16) - i).mean() for d, i in zip(decoded, images,
                                                                        strict=True)]
    assert max(errors) < 8, errors  # 2 Mbit/s of a noisy 720p camera


def test_a_cameras_own_planes_encode_to_the_picture_its_bgr_does(tmp_path: Path) -> None:
    """A frame read from a yuv420p camera stand-in (a Y4M file, as the thin client's bench
    reads it) goes to x264 as the planes the reader copied out; the session's picture is the
    one converting its BGR back gives, within x264's own error."""
    import cv2

    from livecam.capture import make_source, parse_input
    from livecam.config.schema import CaptureConfig

    clip = tmp_path / "camera.y4m"
    with av.open(str(clip), "w", format="yuv4mpegpipe") as container:
        stream = container.add_stream("wrapped_avframe", rate=30)
        stream.width, stream.height, stream.pix_fmt = 1280, 720, "yuv420p"
        for image in _frames(30):
            for packet in stream.encode(av.VideoFrame.from_ndarray(
                    cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420), format="yuv420p")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    source = make_source(parse_input(f"file:{clip}"), CaptureConfig())
    source.keeps_planes_i420 = True  # type: ignore[attr-defined]  # as the capture thread sets
    source.open()
    try:
        images, planes = [], []
        while (image := source.read()) is not None:
            kept = source.planes_i420_of(image)  # type: ignore[attr-defined]
            assert kept is not None
            images.append(image)
            planes.append(kept)
    finally:
        source.close()
    assert len(images) == 30
    from_planes = _decode(_encode(images, planes=planes))
    from_bgr = _decode(_encode(images))
    assert len(from_planes) == len(from_bgr) == len(images)

    def errors(decoded: list[np.ndarray]) -> list[float]:
        return [float(np.abs(d.astype(np.int16) - i).mean())
                for d, i in zip(decoded, images, strict=True)]

    assert max(errors(from_planes)) < 8, errors(from_planes)  # as from the BGR (above)
    assert np.mean(errors(from_planes)) <= np.mean(errors(from_bgr)) + 0.25, (
        errors(from_planes), errors(from_bgr))
    between = [float(np.abs(a.astype(np.int16) - b).mean())
               for a, b in zip(from_planes, from_bgr, strict=True)]
    assert max(between) < 3, between  # the same picture, two encodes of it


def test_h264_at_its_bitrate_is_no_worse_than_aiortcs_vp8() -> None:
    from aiortc.codecs import Vp8Decoder, Vp8Encoder
    from aiortc.codecs.vpx import vp8_depayload
    from aiortc.jitterbuffer import JitterFrame

    images = _frames(60)
    encoder, decoder = Vp8Encoder(), Vp8Decoder()  # at its starting rate, 1 Mbit/s
    vp8: list[np.ndarray] = []
    for k, image in enumerate(images):
        frame = to_video_frame(image)
        frame.pts, frame.time_base = k * 3000, fractions.Fraction(1, 90_000)
        payloads, timestamp = encoder.encode(frame)
        data = b"".join(vp8_depayload(p) for p in payloads)
        vp8 += [f.to_ndarray(format="bgr24") for f in decoder.decode(JitterFrame(data,
                                                                                 timestamp))]
    h264 = _decode(_encode(images))

    def error(decoded: list[np.ndarray]) -> float:  # past the first second's ramp
        return float(np.mean([np.abs(d.astype(np.int16) - i).mean()
                              for d, i in zip(decoded[30:], images[30:], strict=True)]))

    assert error(h264) <= error(vp8), (error(h264), error(vp8))


def test_a_receiver_that_missed_the_start_has_the_picture_within_the_refresh() -> None:
    refresh = round(REFRESH_EVERY_S * 30)
    images = _frames(4 * refresh)
    packets = _encode(images)
    sizes = [len(bytes(p)) for p in packets]
    assert max(sizes[1:]) < 4 * float(np.median(sizes)), sizes  # no keyframe spike
    skipped = refresh // 2  # the first keyframe and what followed, lost
    decoded = _decode(packets[skipped:])
    assert len(decoded) >= 2 * refresh, len(decoded)  # pictures again within the refresh
    tail = decoded[-refresh:]  # a whole refresh after the join
    shown = images[-refresh:]
    errors = [np.abs(d.astype(np.int16) - i).mean() for d, i in zip(tail, shown, strict=True)]
    assert max(errors) < 8, errors


def test_the_encoder_frame_holds_opencvs_planes_at_every_even_size() -> None:
    import cv2

    rng = np.random.default_rng(7)
    for height, width in ((720, 1280), (722, 1280), (270, 480)):  # 722, 270: not a 4-multiple
        image = rng.integers(0, 256, (height, width, 3), np.uint8)
        frame = to_video_frame(image)
        assert (frame.format.name, frame.width, frame.height) == ("yuv420p", width, height)
        assert np.array_equal(frame.to_ndarray(), cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420))
    odd = to_video_frame(rng.integers(0, 256, (9, 16, 3), np.uint8))
    assert odd.format.name == "bgr24"  # no 4:2:0 layout: the encoder converts it


def test_a_slow_cameras_frame_is_no_bigger_than_the_rate_controls_buffer() -> None:
    # x264 grew its buffer to a frame's share of the bitrate: at 0.01 fps the first frame
    # was 328 KB, about 250 packets sent at once, and the server's socket (212 KB by default)
    # dropped its tail, so the session never had a camera frame
    buffer_bytes = BITRATE_BPS // 2 // 8  # vbv-bufsize: half a second of the bitrate
    for fps in (0.01, 1.0):
        sizes = [packet.size for packet in _encode(_frames(4), fps=fps)]  # type: ignore[attr-defined]
        assert max(sizes) <= buffer_bytes, (fps, sizes)

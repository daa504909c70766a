"""Capture: frame sources and the capture thread that feeds the pipeline the newest frame."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from livecam.capture.base import FrameSource
from livecam.capture.network import INPUT_SCHEMES
from livecam.config.schema import CaptureConfig
from livecam.core.errors import UsageError
from livecam.core.netstreams import url_problem

INPUT_HELP = (
    "camera:0 | camera:/dev/video2 | file:PATH (a video, or a pipe such as /dev/stdin) | "
    "image:PATH | synthetic[:WxH] | rtmp://… | rtsp://… | srt://… | udp://… (network "
    "streams; ?listen=1 on rtmp/rtsp, mode=listener on srt, waits for a sender)"
)


@dataclass(frozen=True)
class InputSpec:
    """A parsed ``--input`` value."""

    kind: str  # camera | file | image | synthetic | network (target: the whole URL)
    target: str = ""


def parse_input(text: str) -> InputSpec:
    """Parse ``--input``; raises :class:`UsageError` with the accepted forms."""
    kind, _, target = text.partition(":")
    if kind.lower() in INPUT_SCHEMES and target.startswith("//") and len(target) > 2:
        problem = url_problem(text)
        if problem:
            raise UsageError(f"--input {text!r}: {problem}")
        return InputSpec("network", text)
    if kind == "synthetic":
        return InputSpec("synthetic", target)
    if kind in ("camera", "file", "image") and target:
        return InputSpec(kind, target)
    if ":" not in text and text:
        # a bare path (`--input clip.mp4`): say which form fits it, not only the forms
        is_image = text.lower().endswith((".jpg", ".jpeg", ".png", ".bmp", ".webp"))
        hint = f"image:{text}" if is_image else f"file:{text}"
        raise UsageError(f"--input {text!r} is not understood; did you mean --input {hint}? "
                         f"(forms: {INPUT_HELP})")
    raise UsageError(f"--input {text!r} is not understood; use {INPUT_HELP}")


def make_source(spec: InputSpec, config: CaptureConfig) -> FrameSource:
    """Build (not open) the source for ``spec``. Imports OpenCV lazily."""
    from livecam.capture import sources

    if spec.kind == "camera":
        device: int | str = int(spec.target) if spec.target.isdigit() else spec.target
        return sources.CameraSource(device=device, width=config.width, height=config.height,
                                    fps=config.fps, fourcc=config.fourcc)
    max_pixels = round(config.max_image_megapixels * 1e6)
    if spec.kind == "network":
        from livecam.capture.network import NetworkSource

        return NetworkSource(url=spec.target, timeout_s=config.network_timeout_s,
                             fps_fallback=config.fps, size_px=(config.width, config.height),
                             max_pixels=max_pixels)
    if spec.kind == "file":
        return sources.FileSource(path=Path(spec.target), fps_fallback=config.fps,
                                  max_pixels=max_pixels)
    if spec.kind == "image":
        from livecam.capture.still import STILL_INPUT_PIXELS

        # shrunk, but never below the size a camera is asked for
        return sources.ImageSource(
            path=Path(spec.target), fps=config.fps, max_pixels=max_pixels,
            decode_pixels=max(STILL_INPUT_PIXELS, config.width * config.height))
    width, height = config.width, config.height
    if spec.target:
        try:
            w_text, h_text = spec.target.lower().split("x")
            width, height = int(w_text), int(h_text)
        except ValueError:
            raise UsageError(f"--input synthetic:{spec.target}: size must be WxH, "
                             "e.g. synthetic:1920x1080") from None
        if not (16 <= width <= 8192 and 16 <= height <= 8192):
            raise UsageError(f"--input synthetic:{spec.target}: size must be 16..8192 px")
    return sources.SyntheticSource(width=width, height=height, fps=config.fps)


__all__ = ["INPUT_HELP", "FrameSource", "InputSpec", "make_source", "parse_input"]

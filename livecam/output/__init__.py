"""Output: frame sinks (virtual camera, file, window, null) and the pacing output thread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from livecam.config.schema import OutputConfig
from livecam.core.errors import UsageError
from livecam.core.netstreams import url_problem
from livecam.output.base import FrameSink, GuiSink, I420Sink

OUTPUT_HELP = ("virtualcam | file:PATH.mp4 | window | null | rtmp://… | srt://… | udp://… "
               "(H.264 to a network server or address)")

#: how long a network output waits for its server (the check at open, each write)
NETWORK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class OutputSpec:
    """A parsed ``--output`` value."""

    kind: str  # virtualcam | file | window | null | network (target: the whole URL)
    target: str = ""


def parse_output(text: str) -> OutputSpec:
    """Parse ``--output``; raises :class:`UsageError` with the accepted forms."""
    from livecam.output.network import OUTPUT_MUXERS

    kind, _, target = text.partition(":")
    if kind.lower() in OUTPUT_MUXERS and target.startswith("//") and len(target) > 2:
        problem = url_problem(text)
        if problem:
            raise UsageError(f"--output {text!r}: {problem}")
        return OutputSpec("network", text)
    if kind in ("virtualcam", "window", "null") and not target:
        return OutputSpec(kind)
    if kind == "file" and target:
        return OutputSpec("file", target)
    raise UsageError(f"--output {text!r} is not understood; use {OUTPUT_HELP}")


def make_sink(spec: OutputSpec, config: OutputConfig, *, live: bool = False,
              i420: bool = False) -> FrameSink:
    """Build (not open) the sink for ``spec``; ``live``: for a real-time run (a file is
    then encoded without holding frames back, see :class:`~livecam.output.sinks.FileSink`);
    ``i420``: the pictures arrive as I420 (a virtual camera may then be opened in it, see
    :class:`~livecam.output.sinks.VirtualCamSink`)."""
    from livecam.output import sinks, window

    if spec.kind == "virtualcam":
        return sinks.VirtualCamSink(device=config.device, backend=config.backend, i420=i420)
    if spec.kind == "file":
        return sinks.FileSink(path=Path(spec.target), codec=config.file_codec,
                              crf=config.file_crf, low_delay=live)
    if spec.kind == "network":
        from livecam.output.network import NetworkSink

        return NetworkSink(url=spec.target, bitrate_kbps=config.network_bitrate_kbps,
                           timeout_s=NETWORK_TIMEOUT_S)
    if spec.kind == "window":
        return window.WindowSink()
    return sinks.NullSink()


__all__ = ["OUTPUT_HELP", "FrameSink", "GuiSink", "I420Sink", "OutputSpec", "make_sink",
           "parse_output"]

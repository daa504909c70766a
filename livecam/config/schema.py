"""The config schema: one frozen dataclass per section.

Every field is a :func:`knob` with its help text; ``config.yaml`` at the repository root
documents the same keys with the same defaults (a test keeps the two in step).
Each section belongs to one part of the package; edit only your own section.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from livecam.config.analysis import AnalysisConfig
from livecam.config.control import ControlConfig
from livecam.config.engine import EngineConfig, ModelsConfig
from livecam.config.fields import is_derived, knob
from livecam.config.gpu import GpuConfig
from livecam.config.identity import IdentityConfig
from livecam.config.serve import ServeConfig
from livecam.config.swap import SwapConfig
from livecam.core.commands import MAX_OUTPUT_DELAY_MS


@dataclass(frozen=True)
class CaptureConfig:
    width: int = knob(1280, "Width asked of a camera, px (the camera may give another).",
                      range=(16, 8192))
    height: int = knob(720, "Height asked of a camera, px.", range=(16, 8192))
    fps: float = knob(30.0, "Frame rate asked of a camera; also the rate of `synthetic` and of "
                      "`image:` sources, and the pace of `file:` sources in real time.",
                      range=(1.0, 240.0))
    fourcc: str = knob("MJPG", "Pixel format asked of a camera (MJPG gives full frame rates "
                       "at 720p/1080p on most USB cameras; YUYV is often limited to 5-10 fps).")
    loop: bool = knob(True, "Restart `file:` inputs at their end instead of stopping (a pipe "
                      "cannot restart: it always stops at its end).")
    max_image_megapixels: float = knob(100.0, "Largest image livecam decodes, megapixels "
                                       "(width x height / 1e6; a decoded image takes 3 bytes "
                                       "per pixel): an `image:` input, a `file:` frame, an "
                                       "identity photo, a reference photo. Larger ones are "
                                       "refused from their header, before decoding (protects "
                                       "memory).", range=(0.01, 1000.0))
    reconnect_initial_s: float = knob(0.5, "First wait before reopening a lost camera or "
                                      "network input, or probing a failed Triton server "
                                      "(engine.backend triton), s; doubles after each failure.",
                                      range=(0.01, 60.0))
    reconnect_max_s: float = knob(5.0, "Longest wait between those attempts, s.",
                                  range=(0.01, 600.0))
    network_timeout_s: float = knob(
        5.0, "Network inputs (rtmp://, rtsp://, srt://, udp://): the longest wait for a "
        "stream to open or for its next frame, s; then it is reopened (reconnect_initial_s "
        "backoff). Lower notices a dead server sooner; higher rides out longer stalls.",
        range=(0.5, 600.0))


@dataclass(frozen=True)
class OutputConfig:
    fps: float = knob(0.0, "Frames per second sent to the sink; 0 = the input's rate.",
                      range=(0.0, 240.0))
    width: int = knob(0, "Output width, px; 0 = the input's width.", range=(0, 8192))
    height: int = knob(0, "Output height, px; 0 = the input's height.", range=(0, 8192))
    device: str = knob("", "Virtual camera device, e.g. /dev/video10 (Linux); empty = the "
                       "backend's default (first v4l2loopback device, OBS virtual camera).")
    backend: str = knob("", "pyvirtualcam backend name (v4l2loopback, obs, unitycapture, "
                        "akvcam); empty = the platform's default.")
    file_codec: str = knob("libx264", "Video codec for `file:` outputs (PyAV encoder name).")
    file_crf: int = knob(20, "Quality of `file:` outputs (x264 CRF: lower = better, larger).",
                         range=(0, 51))
    network_bitrate_kbps: int = knob(
        4000, "Video bitrate of network outputs (rtmp://, rtsp://, srt://, udp://), kbit/s, "
        "held by the encoder: higher = sharper, needs that much upload (720p30: 2500-4000).",
        range=(100, 100000))
    delay_ms: float = knob(
        0.0, "A/V delay, ms: every frame is sent this long after it was captured (or as soon "
        "as it is ready when the stages take longer), so a microphone captured separately can "
        "be delayed by the same fixed amount in OBS (Advanced Audio Properties → Sync "
        "Offset). Exact to one frame; change it live with `livecam ctl delay MS`. Holds that "
        "many ms of frames in memory (1080p: 6 MB a frame, 30 a second). 0 = send at once.",
        range=(0.0, MAX_OUTPUT_DELAY_MS))


@dataclass(frozen=True)
class PipelineConfig:
    realtime: bool = knob(True, "Live mode: keep only the newest frame at every hop and drop the "
                          "rest (bounded latency). false = process every frame in order, no "
                          "drops, as fast as possible (for files).")
    status_interval_s: float = knob(1.0, "Seconds between status lines (fps, latency, drops); "
                                    "0 = off.", range=(0.0, 3600.0))
    stage_error_log_interval_s: float = knob(5.0, "A failing stage is logged at most once per "
                                             "this many seconds; its frame goes out with its "
                                             "faces covered (advanced.swap.unswappable).",
                                             range=(0.0, 3600.0))
    threads: int = knob(2, "Threads that run the stages: 1 = all stages on one thread; 2 = "
                        "analysis on one, the swap on another, so one frame's analysis overlaps "
                        "the previous frame's swap (more frames per second where a core is "
                        "free; each hop still holds one frame, but when the stages cannot keep "
                        "up with the camera a frame may wait one swap at the hop: set 1 for the "
                        "lowest latency on a busy CPU). More splits the stages one per thread. "
                        "The thin client (run --remote) always takes 1: its one stage only "
                        "hands frames on.",
                        range=(1, 4))
    gil_switch_interval_ms: float = knob(
        0.25, "Python's thread switch interval while livecam runs, ms (Python's own is 5): a "
        "pipeline thread that let go of the GIL for a moment (a numpy call, a wait for the "
        "GPU) gets it back within this time instead of up to 5 ms later, which matters with "
        "several streams in one process. 0 = leave Python's.",
        range=(0.0, 10.0))
    overload_drop_share: float = knob(
        0.2, "Live mode warns that the pipeline is overloaded (log, status line, API, panel, "
        "metrics) when more than this share of the frames captured in the last second were "
        "dropped before the output. Frames are dropped either way (the newest wins, latency "
        "stays bounded); the warning says the stream runs below the camera's rate.",
        range=(0.01, 1.0))
    overload_latency_ms: float = knob(
        250.0, "... or when the median capture→output time of the last second's frames is "
        "over this many ms (output.delay_ms is not counted).", range=(1.0, 60000.0))
    max_streams: int = knob(
        64, "The most streams (input → output pairs) one process starts; more are refused "
        "at start with one line. Each stream holds its own capture, face models and frame "
        "buffers (on the CPU path about 115 MB: 64 streams took 7.6 GB and 170 s to start on "
        "a 2-core machine), so a pasted or generated `streams:` list cannot start streams "
        "until memory runs out. Raise it for a machine that holds more.", range=(1, 4096))


@dataclass(frozen=True)
class LoggingConfig:
    level: str = knob("INFO", "Log level.", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    json: bool = knob(False, "Write logs as one JSON object per line (for daemons).")


@dataclass(frozen=True)
class Config:
    """The whole configuration of one run. Immutable: runtime changes go through commands.

    A :func:`~livecam.config.fields.derived` field of a section takes its knob's value here,
    so each part can be handed its own section alone."""

    capture: CaptureConfig = field(default_factory=CaptureConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    swap: SwapConfig = field(default_factory=SwapConfig)
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    control: ControlConfig = field(default_factory=ControlConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    streams: tuple[dict[str, str], ...] = knob(
        (), "Several input → output pairs in one process, for `livecam run` and `livecam "
        "daemon` without --input/--output: a list of {input: SPEC, output: SPEC} (the specs "
        "of --input and --output). Each stream has its own capture, output, status and "
        "controls (`livecam ctl --stream K`); on a CUDA GPU the faces of every stream are "
        "swapped in one generator call. Empty = one stream from --input/--output.")

    def __post_init__(self) -> None:
        for section in dataclasses.fields(self):
            value = getattr(self, section.name)
            if not dataclasses.is_dataclass(value) or isinstance(value, type):
                continue
            copied = {f.name: self._knob(f.metadata["derived_from"])
                      for f in dataclasses.fields(value) if is_derived(f)}
            if copied:  # frozen: the one place a section is swapped after construction
                object.__setattr__(self, section.name, dataclasses.replace(value, **copied))

    def _knob(self, path: str) -> Any:
        node: Any = self
        for part in path.removeprefix("advanced.").split("."):
            node = getattr(node, part)
        return node

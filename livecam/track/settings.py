"""ByteTrack settings: a frozen dataclass whose defaults equal ``trackers/bytetrack.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from livecam.config.fields import knob
from livecam.config.loader import build
from livecam.core.errors import ConfigError


@dataclass(frozen=True)
class ByteTrackSettings:
    """Every knob is explained, with what turning it up or down trades, in
    ``trackers/bytetrack.yaml`` (the same names and defaults)."""

    high_score_threshold: float = knob(0.6, "Score for the first association and new tracks.",
                                       range=(0.0, 1.0))
    low_score_threshold: float = knob(0.3, "Lowest score used, in the second association.",
                                      range=(0.0, 1.0))
    new_track_score_threshold: float = knob(0.7, "Score needed to start a track.",
                                            range=(0.0, 1.0))
    first_association_min_iou: float = knob(0.2, "Min IoU, confident detections.",
                                            range=(0.0, 1.0))
    second_association_min_iou: float = knob(0.5, "Min IoU, weak detections.",
                                             range=(0.0, 1.0))
    unconfirmed_association_min_iou: float = knob(0.3, "Min IoU to confirm a new track.",
                                                  range=(0.0, 1.0))
    fuse_detection_score: bool = knob(True, "Multiply IoU by detection score when matching.")
    lost_track_buffer_frames: int = knob(60, "Frames a lost track waits to come back.",
                                         range=(0, 100000))
    stop_lost_tracks_at_frame_edge: bool = knob(
        True, "A lost track that leaves the frame waits at the edge.")
    duplicate_track_min_iou: float = knob(0.85, "IoU above which two live tracks are one.",
                                          range=(0.0, 1.0))
    kalman_position_noise_weight: float = knob(0.05, "Position noise / box height.",
                                               range=(1e-6, 10.0))
    kalman_velocity_noise_weight: float = knob(0.00625, "Velocity noise / box height.",
                                               range=(1e-6, 10.0))

    def __post_init__(self) -> None:
        if self.low_score_threshold > self.high_score_threshold:
            raise ConfigError("bytetrack: low_score_threshold must not exceed "
                              "high_score_threshold")


def shipped_bytetrack_file() -> Path:
    """``trackers/bytetrack.yaml`` as installed: inside the package from a wheel
    (``livecam/data/trackers``, mapped by pyproject.toml), at the checkout's top otherwise."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "data" / "trackers"
    return (shipped if shipped.is_dir() else package.parent / "trackers") / "bytetrack.yaml"


def load_bytetrack_settings(path: str | Path | None) -> ByteTrackSettings:
    """Settings from a YAML file (every key optional), or the defaults for None / ''."""
    if path is None or str(path) == "":
        return ByteTrackSettings()
    from livecam.config.safe_yaml import YamlRefused, read_yaml_file

    path = Path(path)
    try:
        data = read_yaml_file(path) or {}
    except FileNotFoundError:
        raise ConfigError(f"tracker file {path} does not exist (copy "
                          f"{shipped_bytetrack_file()} for a template)") from None
    except OSError as exc:
        raise ConfigError(f"tracker file {path} cannot be read: {exc.strerror}") from None
    except YamlRefused as exc:
        raise ConfigError(f"tracker file {path} {exc}") from None
    return build(ByteTrackSettings, data, prefix=f"{path.name}: ")

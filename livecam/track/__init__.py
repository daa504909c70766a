"""Multi-object tracking: ByteTrack over face boxes (numpy + scipy, no global state)."""

from livecam.track.bytetrack import ByteTracker, TrackResult, iou_matrix
from livecam.track.settings import ByteTrackSettings, load_bytetrack_settings

__all__ = ["ByteTrackSettings", "ByteTracker", "TrackResult", "iou_matrix",
           "load_bytetrack_settings"]

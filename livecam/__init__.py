"""livecam: a real-time face-swap virtual camera."""

__version__ = "0.1.0"

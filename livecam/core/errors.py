"""The error tree.

Every error livecam raises on purpose derives from :class:`LivecamError`; leaves also inherit
the matching builtin so callers can catch either. Messages say what to do, not only what failed.
"""

from __future__ import annotations


class LivecamError(Exception):
    """Root of every error livecam raises on purpose."""


class ConfigError(LivecamError, ValueError):
    """A config key, value or command-line option is wrong; the message names the dotted key."""


class UsageError(LivecamError, ValueError):
    """A command-line argument is wrong (bad --input/--output spec, missing file, ...)."""


class CaptureError(LivecamError, RuntimeError):
    """A frame source could not be opened or read."""


class NoSenderYet(CaptureError):
    """A source that listens (a network input in listener mode) was opened and nobody sent to
    it in time: not a fault, so the capture thread listens again at once, without backoff."""


class OutputError(LivecamError, RuntimeError):
    """A frame sink (virtual camera, file, window) could not be opened or written."""


class DependencyError(LivecamError, ImportError):
    """An optional package is missing; the message names the extra to install."""


class ModelError(LivecamError, RuntimeError):
    """A model file is missing, corrupt or does not match its manifest."""


class IdentityError(LivecamError, ValueError):
    """An identity name or photo is unusable; the message says why and what to do."""


class EngineUnavailableError(LivecamError, ConnectionError):
    """A remote engine (a Triton server) is down, unreachable or too slow for this request.

    At start it stops the run with one line naming the address; while streaming the swap stage
    treats the faces of that frame as unswappable (never sent as they are) while the engine
    reconnects in the background.
    """


class InputError(CaptureError, UsageError):
    """An input file, image or pipe cannot be used (missing, not a video, too large, ...).

    A :class:`CaptureError` to the capture thread and a :class:`UsageError` to the command line
    (exit 2): the user gave something livecam cannot read, and the message says what to give.
    """

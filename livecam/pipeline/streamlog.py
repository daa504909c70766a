"""Log lines of one of several streams in one process, prefixed with "stream K: " (as their
status lines are), unchanged for the only one."""

from __future__ import annotations

import logging
from typing import Any


class StreamLog(logging.LoggerAdapter):
    """``logger``'s lines prefixed with "stream K: " for stream ``stream`` (None: as they are)."""

    def __init__(self, logger: logging.Logger, stream: int | None) -> None:
        super().__init__(logger, {})
        self.prefix = "" if stream is None else f"stream {stream}: "

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"{self.prefix}{msg}", kwargs

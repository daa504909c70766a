"""``Lifecycle``: the explicit open/close contract shared by stages, engines and sinks.

Construction is cheap; ``open`` does the heavy work (models, buffers, devices); ``close`` frees
it and is idempotent. Used as a context manager, ``with obj:`` opens and always closes.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Lifecycle:
    """No-op ``open``/``close`` and context-manager support; subclasses override what they hold."""

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

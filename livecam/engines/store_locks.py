"""The model store's file locks: waited for visibly, and for a bounded time.

A lock of the store is held while a model's files change (a pin check, a move into place, a
stamp, one hash of the file; a whole download for the download lock), so a wait means that
another livecam process imports, fetches or checks the same model. Most waits end within a
moment and say nothing; one past the limit (``advanced.models.lock_wait_s``) raises
:class:`ModelBusyError`, which says what to do, before this process has written anything. How
the locks behave (and why a free one means no live writer): :mod:`livecam.core.locks`.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from pathlib import Path

from livecam.config.engine import ModelsConfig
from livecam.core import locks
from livecam.core.errors import LivecamError, ModelError
from livecam.core.locks import SAY_WAITING_AFTER_S, held_if_free

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_LOCK_WAIT_S", "SAY_WAITING_AFTER_S", "ModelBusyError", "held_if_free",
           "holding"]

#: ``advanced.models.lock_wait_s``'s default: longer than another process takes to hash or move a
#: model of a few hundred MB on a slow disk, a few minutes of someone else's download.
DEFAULT_LOCK_WAIT_S: float = ModelsConfig.lock_wait_s


class ModelBusyError(ModelError):
    """Another process held a lock of the model store for longer than the store waits."""


def holding(lock_path: Path, doing: str, *, wait_s: float,
            knob: str | None = "advanced.models.lock_wait_s",
            error: type[LivecamError] = ModelBusyError) -> AbstractContextManager[None]:
    """:func:`livecam.core.locks.holding` with the model store's setting and error."""
    return locks.holding(lock_path, doing, wait_s=wait_s, knob=knob, error=error,
                         logger=log)

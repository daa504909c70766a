"""Running a pipeline to its end, and the controls that feed it: what
:class:`~livecam.pipeline.runtime.App` and :class:`~livecam.pipeline.streams.StreamSet`
share."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

log = logging.getLogger(__name__)


class ControlSource(Protocol):
    """Something that feeds ``app.commands`` while the app runs (hotkeys, the control API).
    ``start`` may raise a :class:`LivecamError`; ``stop`` is idempotent."""

    def start(self) -> Any: ...

    def stop(self) -> None: ...


def stop_controls(controls: Sequence[ControlSource]) -> None:
    """Stop ``controls`` in reverse start order; one that fails is logged and the rest go on."""
    for control in reversed(controls):
        try:
            control.stop()
        except Exception as exc:  # stopping must go on
            log.error("stopping %s failed: %s", type(control).__name__, exc)


class Runnable(Protocol):
    """What :func:`run_to_end` runs: an :class:`App` or a
    :class:`~livecam.pipeline.streams.StreamSet`."""

    @property
    def output_error(self) -> BaseException | None: ...

    def start(self) -> None: ...

    def wait(self, timeout_s: float | None = None) -> bool: ...

    def stop(self, timeout_s: float = 0.9) -> None: ...


def run_to_end(run: Runnable) -> None:
    """``start``, wait until done (or Ctrl-C), ``stop``; then raise the output's error, if any.
    On the thread that draws a preview window (``wait`` draws it)."""
    run.start()
    try:
        while not run.wait(0.2):
            pass
    finally:
        run.stop()
    if run.output_error is not None:
        raise run.output_error

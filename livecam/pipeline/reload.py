"""Live reloads: re-read the config file and the identity library, build new stages off the
frame path and hand them to the running :class:`~livecam.pipeline.runtime.App`.

What a reload cannot change in a running process (capture, output, pipeline, control and
logging sections, the streams list) is logged as needing a restart; a reload that fails keeps
the running setup.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from livecam.config import Config
from livecam.core.commands import CommandQueue, SetIdentityList
from livecam.core.errors import LivecamError
from livecam.core.reload_result import ReloadResult
from livecam.core.stage import AnyStage
from livecam.core.types import RuntimeState
from livecam.pipeline.streamlog import StreamLog

log = logging.getLogger(__name__)

#: Builds a stream's stage chain (not opened) for a config and runtime state.
StageFactory = Callable[[Config, RuntimeState], list[AnyStage]]


class App(Protocol):
    """What a reload uses of the running :class:`~livecam.pipeline.runtime.App` (named here
    so this module does not import the one that makes its reloader)."""

    config: Config
    stream: int | None
    commands: CommandQueue

    @property
    def done(self) -> bool: ...

    @property
    def started(self) -> bool: ...

    @property
    def state(self) -> RuntimeState: ...

    def replace_stages(self, stages: Sequence[AnyStage]) -> None: ...

_RESTART_SECTIONS = ("capture", "output", "pipeline", "control", "logging", "streams")


class Reloader:
    """Reloads ``app`` on a thread of its own, so frames keep flowing.

    ``config_loader`` re-reads the config (None: keep ``app.config``), ``stage_factory``
    builds the new stages (None: the stages stay), ``identity_names`` lists the library
    (None: the identity list stays). ``request`` may be called from any thread (SIGHUP,
    ``livecam ctl reload``); a request while a reload runs makes one more pass after it, and
    its ``result`` is told how that pass ended.
    """

    def __init__(self, app: App, *, stage_factory: StageFactory | None,
                 config_loader: Callable[[], Config] | None,
                 identity_names: Callable[[], Sequence[str]] | None) -> None:
        self._app = app
        self._log = StreamLog(log, app.stream)
        self._stage_factory = stage_factory
        self._config_loader = config_loader
        self._identity_names = identity_names
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False
        self._waiting: list[ReloadResult] = []  # told how the next pass ends

    def request(self, result: ReloadResult | None = None) -> None:
        with self._lock:
            if result is not None:
                result.begin()
                self._waiting.append(result)
            if self._thread is not None and self._thread.is_alive():
                self._again = True  # one more pass once the running one ends
                return
            self._thread = threading.Thread(target=self._loop, name="livecam-reload",
                                            daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._lock:
                waiting, self._waiting = self._waiting, []
                self._again = False
            try:
                message = self._reload(waiting)
                error = None
            except Exception as exc:  # a failed reload keeps the running setup
                self._log.error("reload failed, keeping the current setup: %s", exc)
                message = error = (f"{self._log.prefix}reload failed ({exc}); livecam keeps "
                                   "running as it was")
            _tell(waiting, error=error, message=message)
            with self._lock:
                if not self._again or self._app.done:
                    self._thread = None
                    left, self._waiting = self._waiting, []
                    break
        _tell(left, error="livecam stopped before reloading", message="not reloaded")

    def _reload(self, waiting: list[ReloadResult]) -> str:
        """One pass; what it did, one line. A config that does not load is told to
        ``waiting`` at once (they are then emptied): the old config stays, the rest goes on."""
        t0 = time.perf_counter()
        app = self._app
        new_config = app.config
        if self._config_loader is not None:
            try:
                new_config = self._config_loader()
            except LivecamError as exc:
                self._log.error("config not reloaded (%s); keeping the running config", exc)
                # every stream reads the same file: one line for all of them
                line = (f"config not reloaded: {exc}; livecam keeps running with its previous "
                        "config")
                _tell(waiting, error=line, message=line)
        changed = [section for section in _RESTART_SECTIONS
                   if getattr(new_config, section) != getattr(app.config, section)]
        for section in changed:
            self._log.warning("config section %r changed: restart livecam for it to "
                              "take effect", section)
        app.config = new_config
        names = tuple(self._identity_names()) if self._identity_names is not None else None
        if self._stage_factory is not None and app.started:
            state = app.state if names is None else dataclasses.replace(app.state,
                                                                        identities=names)
            app.replace_stages(self._stage_factory(new_config, state))
        if names is not None:
            app.commands.put(SetIdentityList(names))
        did = ("no identity library" if names is None else
               f"{len(names)} identities ({', '.join(names) or 'none'})")
        self._log.info("reloaded in %.2f s: %s", time.perf_counter() - t0, did)
        restart = (f"; restart livecam for the changed {', '.join(changed)} section"
                   f"{'s' if len(changed) > 1 else ''}" if changed else "")
        return f"reloaded: {did}{restart}"  # the same for every stream: one line


def _tell(results: list[ReloadResult], *, error: str | None, message: str) -> None:
    for result in results:
        result.finish(error=error, message=message)
    results.clear()

"""Streams added and removed while livecam runs, through the control API::

    GET    /api/streams                 {"streams": [brief, ...]} (one per running stream)
    POST   /api/streams {"input": IN, "output": OUT}
                                        201 {"stream": K}: built, opened and running
    DELETE /api/streams/K               {"stream": K, "removed": true, "summary": "..."}

Errors (JSON ``{"error"}``): 400 a bad body or a spec livecam cannot run (the reason), 404 no
stream K, 409 the process cannot take another stream now (``advanced.pipeline.max_streams``, the GPU
pipeline's size, stopping), 422 the stream's input or output failed to open. The other
streams keep running while a stream opens or stops: the work runs in a worker thread, off
the API's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Protocol

from aiohttp import web

from livecam.control.apply import read_body
from livecam.control.http import Limits
from livecam.control.requests import RequestError
from livecam.control.status import ControlTarget, StateCollector, StatusReporter
from livecam.core.errors import LivecamError


class StreamRegistry(Protocol):
    """The streams of the process as the control API sees them (``StreamSet`` implements
    it). Any thread may call; ``add_stream`` and ``remove_stream`` block while the stream
    opens or stops."""

    def targets(self) -> Mapping[int, ControlTarget]:
        """The running streams by id, in id order (a snapshot)."""
        ...

    def add_stream(self, input_spec: str, output_spec: str) -> int:
        """Build, open and start a stream; its id. ``ValueError`` for specs it cannot run,
        ``RuntimeError`` when no stream can be added now, another :class:`LivecamError`
        when opening failed."""
        ...

    def remove_stream(self, k: int) -> Any:
        """Stop stream ``k`` and forget it (``KeyError``: none); its summary."""
        ...


class FixedStreams:
    """A :class:`StreamRegistry` over streams given once (tests, one app): nothing can be
    added or removed."""

    def __init__(self, targets: list[ControlTarget]) -> None:
        self._targets = dict(enumerate(targets))

    def targets(self) -> Mapping[int, ControlTarget]:
        return self._targets

    def add_stream(self, input_spec: str, output_spec: str) -> int:
        raise LivecamError("this livecam cannot add streams while it runs")

    def remove_stream(self, k: int) -> Any:
        raise LivecamError("this livecam cannot remove streams while it runs")


class StreamViews:
    """The status reporter and Prometheus state collector of each running stream, kept in
    step with ``registry`` (made for a stream that appeared, dropped for one removed).
    Collectors sit in their stream's metrics registry while ``register(True)`` is in force.
    Any thread."""

    def __init__(self, registry: StreamRegistry, extra: dict[str, Any]) -> None:
        self._registry = registry
        self._extra = extra
        self._lock = threading.Lock()
        self._known: dict[int, tuple[ControlTarget, StatusReporter, StateCollector]] = {}
        self._registered = False

    def sync(self) -> Mapping[int, ControlTarget]:
        """The running streams by id (and the views brought in step with them)."""
        targets = self._registry.targets()
        with self._lock:
            for k in [k for k in self._known if k not in targets]:
                target, _, collector = self._known.pop(k)
                with contextlib.suppress(KeyError):
                    target.metrics.registry.unregister(collector)
            for k, target in targets.items():
                if k in self._known and self._known[k][0] is target:
                    continue
                collector = StateCollector(target)
                if self._registered:
                    target.metrics.registry.register(collector)
                self._known[k] = (target, StatusReporter(target, extra=self._extra), collector)
        return targets

    def reporters(self) -> dict[int, StatusReporter]:
        """The running streams' reporters by id."""
        self.sync()
        with self._lock:
            return {k: r for k, (_, r, _) in self._known.items()}

    def register(self, on: bool) -> None:
        """Put the collectors into (True) or take them out of their metrics registries."""
        self.sync()
        with self._lock:
            self._registered = on
            for target, _, collector in self._known.values():
                with contextlib.suppress(KeyError, ValueError):  # twice
                    if on:
                        target.metrics.registry.register(collector)
                    else:
                        target.metrics.registry.unregister(collector)


async def add_stream(request: web.Request, registry: StreamRegistry,
                     limits: Limits) -> web.Response:
    """``POST /api/streams``: see the module docstring."""
    body = await read_body(request, limits)
    try:
        value = json.loads(body or b"null")
    except ValueError:
        raise RequestError(HTTPStatus.BAD_REQUEST, "body is not JSON: send "
                           '{"input": "...", "output": "..."}') from None
    if (not isinstance(value, dict) or set(value) != {"input", "output"}
            or not all(isinstance(v, str) and v for v in value.values())):
        raise RequestError(HTTPStatus.BAD_REQUEST, 'expected {"input": "...", "output": '
                           '"..."} (the specs of `livecam run --input/--output`)')
    try:
        k = await asyncio.to_thread(registry.add_stream, value["input"], value["output"])
    except RuntimeError as exc:  # StreamLimitError: full, stopping, GPU pipeline's size
        raise RequestError(HTTPStatus.CONFLICT, str(exc)) from None
    except ValueError as exc:  # UsageError, ConfigError: a spec it cannot run
        raise RequestError(HTTPStatus.BAD_REQUEST, str(exc)) from None
    except (LivecamError, OSError) as exc:  # the input or output did not open
        raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY,
                           f"the stream did not start: {exc}") from None
    return web.json_response({"stream": k, "input": value["input"],
                              "output": value["output"]}, status=HTTPStatus.CREATED,
                             headers={"Cache-Control": "no-store",
                                      "Location": f"/api/streams/{k}"})


async def remove_stream(request: web.Request, registry: StreamRegistry) -> web.Response:
    """``DELETE /api/streams/K``: see the module docstring."""
    text = request.match_info["stream"]
    if not text.isdigit():
        raise RequestError(HTTPStatus.BAD_REQUEST, f"stream must be a whole number, not {text!r}")
    k = int(text)
    if k not in registry.targets():
        raise RequestError(HTTPStatus.NOT_FOUND, f"no stream {k} (running: "
                           f"{_ids(registry) or 'none'})")
    try:
        summary = await asyncio.to_thread(registry.remove_stream, k)
    except KeyError:  # removed meanwhile by another request
        raise RequestError(HTTPStatus.NOT_FOUND, f"no stream {k}") from None
    except LivecamError as exc:
        raise RequestError(HTTPStatus.CONFLICT, str(exc)) from None
    line = summary.line() if hasattr(summary, "line") else ""
    return web.json_response({"stream": k, "removed": True, "summary": line},
                             headers={"Cache-Control": "no-store"})


def _ids(registry: StreamRegistry) -> str:
    return ", ".join(str(k) for k in registry.targets())

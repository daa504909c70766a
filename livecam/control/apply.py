"""The command endpoints of the control API (``POST /api/VERB``): read the body within the
limits, build the command (:mod:`livecam.control.requests`), queue it to one stream or to
every stream, and wait, without a thread, until the pipeline applied it (or
``advanced.control.apply_wait_s``, 2 s by default).

The reply is ``{"applied", "frames_sent_at_apply", "first_frame_index", "state",
"delay_ms"}`` (and ``path`` for a snapshot; for a reload, which runs in the background after
the command applied, ``reload``: ``{"status", "message"}`` once it ended or after 5 s); see
:class:`~livecam.core.commands.Ticket`.
Runs on the API server's event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any

from aiohttp import web

from livecam.control.http import Limits
from livecam.control.paths import new_snapshot_path
from livecam.control.requests import RequestError, Tracks, build_command, parse_body
from livecam.control.status import ControlTarget
from livecam.core import commands as cmd
from livecam.core.reload_result import ReloadResult

#: How long a reload's reply waits for the reload once applied: a config that does not load is
#: known in milliseconds, new stages may take many seconds (models, CUDA graphs); past this the
#: reply says it is still reloading. `livecam ctl` waits longer than both together.
_RELOAD_TIMEOUT_S = 5.0


async def run_command(request: web.Request, *, targets: Mapping[int, ControlTarget],
                      stream: int | None, limits: Limits, snapshot_dir: Path,
                      apply_wait_s: float) -> dict[str, Any]:
    """The reply to ``POST /api/VERB`` after applying its command to ``targets[stream]``
    (``targets``: the running streams by id)
    (every running target when ``stream`` is None; the reply shows the first one's state),
    waiting up to ``apply_wait_s`` for the pipeline to take it (``advanced.control.apply_wait_s``).
    :class:`RequestError` for a bad, too large or too slow body, an unknown verb or identity,
    a full command queue, or a stream that has ended."""
    verb = request.path.removeprefix("/api/")
    body = parse_body(await read_body(request, limits))
    if stream is not None and targets[stream].done:
        raise RequestError(HTTPStatus.CONFLICT, f"stream {stream} has stopped (it quit, or its "
                           "input ended); the other streams still run: restart livecam to run "
                           "it again")
    if all(t.done for t in targets.values()):
        raise RequestError(HTTPStatus.CONFLICT, "no stream is running (every stream has "
                           "ended or none was added)")
    # the reply shows the stream's state; for every stream, the first one still running
    target = (targets[stream] if stream is not None
              else next(t for t in targets.values() if not t.done))
    command = build_command(
        verb, body, names=target.state.identities,
        snapshot_path=lambda: str(new_snapshot_path(snapshot_dir)),
        tracks=_tracks([target] if stream is not None
                       else [t for t in targets.values() if not t.done]))
    commands: cmd.Commands = (cmd.CommandFanOut([t.commands for t in targets.values()])
                              if stream is None else target.commands)
    reply, error = await _apply(command, commands, target, apply_wait_s)
    if error is not None:
        raise RequestError(HTTPStatus.INTERNAL_SERVER_ERROR, error)
    if isinstance(command, cmd.Reload) and command.result is not None:
        reply["reload"] = await _reload_outcome(command.result, applied=reply["applied"],
                                                 apply_wait_s=apply_wait_s)
    if isinstance(command, cmd.SaveSnapshot):
        # each stream saves its own file (see SaveSnapshot); the streams it went to, in order
        several = list(targets) != [0]
        went_to = [stream] if stream is not None else [
            k for k, t in targets.items() if not t.done]
        reply["paths"] = [cmd.stream_snapshot_path(command.path, k if several else None)
                          for k in went_to]
        reply["path"] = reply["paths"][0]
    return reply


def _tracks(targets: Sequence[ControlTarget]) -> Tracks:
    """The tracks of ``targets`` (those a command goes to) that an assignment is checked
    against."""
    present: set[int] = set()
    assigned: set[int] = set()
    most = 0
    for target in targets:
        last = target.live.last()
        if last is not None:
            present.update(last.track_ids)
        ids = {tid for tid, _ in target.state.track_identities}
        assigned |= ids
        most = max(most, len(ids))
    return Tracks(frozenset(present), frozenset(assigned), most)


def state_dict(state: Any) -> dict[str, Any]:
    return {"active_identity": state.active_identity, "bypass": state.bypass,
            "identities": list(state.identities), "generation": state.generation,
            "assignments": [{"track_id": t, "identity": n} for t, n in state.track_identities]}


async def read_body(request: web.Request, limits: Limits) -> bytes:
    """The request's body, at most ``limits.max_body_bytes`` within ``limits.body_timeout_s``
    (else :class:`RequestError` 413 or 408). aiohttp keeps it: a second call returns it."""
    limit = limits.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                           f"request body over {limit // 1024} KiB")
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            return await request.read()
    except TimeoutError:
        raise RequestError(HTTPStatus.REQUEST_TIMEOUT, "request body not received in "
                           f"{limits.body_timeout_s:g} s") from None
    except web.HTTPRequestEntityTooLarge:  # a chunked body past the limit
        raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                           f"request body over {limit // 1024} KiB") from None


async def _apply(command: cmd.Command, commands: cmd.Commands, target: ControlTarget,
                 apply_wait_s: float) -> tuple[dict[str, Any], str | None]:
    """Queue ``command`` and wait (without a thread) until the pipeline(s) applied it:
    (the reply, showing ``target``'s state; why its side effect failed, or None)."""
    try:
        ticket = commands.put(command, timeout_s=0)
    except queue.Full:
        raise RequestError(HTTPStatus.SERVICE_UNAVAILABLE, "the pipeline is not taking "
                           "commands (queue full); try again") from None
    done = await _wait_for(ticket.add_done_callback, apply_wait_s)
    state = ticket.state if done and ticket.state is not None else target.state
    return {"applied": done, "frames_sent_at_apply": ticket.frames_sent,
            "first_frame_index": ticket.first_frame_index,
            "state": state_dict(state),
            "delay_ms": target.describe().get("delay_ms", 0.0)}, ticket.error if done else None


async def _reload_outcome(result: ReloadResult, *, applied: bool,
                          apply_wait_s: float) -> dict[str, str]:
    """``{"status", "message"}`` of the reload a command asked for, once it ended (or
    :data:`_RELOAD_TIMEOUT_S` passed): "reloaded", "failed" (``message`` says why and what
    stays in effect), or "reloading" (not over yet: no claim that it worked)."""
    if not applied:
        return {"status": "reloading", "message": "the reload has not started: the pipeline "
                f"did not take the command within {apply_wait_s:g} s"}
    over = await _wait_for(result.add_done_callback, _RELOAD_TIMEOUT_S)
    error = result.error
    if error is not None:
        return {"status": "failed", "message": error}
    if not over:
        return {"status": "reloading", "message": f"still reloading after "
                f"{_RELOAD_TIMEOUT_S:g} s (building the new stages); its log line says how "
                "it ends"}
    return {"status": "reloaded", "message": result.message}


async def _wait_for(add_done_callback: Callable[[Callable[[], None]], None],
                    timeout_s: float) -> bool:
    """Wait, without a thread, until what ``add_done_callback`` belongs to is done (True) or
    ``timeout_s`` passed (False). The callback may come from any thread."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake() -> None:  # the pipeline or reload thread
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(_resolve, done)

    add_done_callback(wake)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done, timeout_s)
    # wait_for cancels the future on a timeout, and a cancelled future is done too
    return done.done() and not done.cancelled()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

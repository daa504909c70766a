"""A WHIP session's own controls, on its Location, with its user's token::

    GET  /whip/ID           -> 200 JSON: the session's state (identity, bypass, frames, stream)
    POST /whip/ID/command   JSON {"command": "select", "identity": NAME}
                                 {"command": "bypass", "on": true|false}
                            -> 200 JSON: the state now (the command takes effect at the
                               stream's next frame)

Another user's token is 404, as for DELETE: a session can neither see nor control another's.
An unknown identity is 404, a malformed command 400. A session may select the server
library's identities and the photos it uploaded itself (:mod:`livecam.remote.photos`).
The command goes to the session's own stream only (never to the other sessions, never to
the server's operator API).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, Protocol

from aiohttp import web

from livecam.core.commands import SelectIdentity, SetBypass


class Session(Protocol):
    """What these routes read of a session (:class:`livecam.remote.whip.Session`)."""

    id: str
    user: str
    stream: int | None


class WhipServer(Protocol):
    """What these routes need of the server (:class:`livecam.remote.whip.WhipServer`)."""

    def names_for(self, session: Any) -> tuple[str, ...]: ...

    def sessions(self) -> Any: ...

    def stream_app(self, session: Any) -> Any: ...

    def user_of(self, request: web.Request) -> str: ...

_MAX_COMMAND_BYTES = 4096


def add_routes(app: web.Application, server: WhipServer) -> None:
    """Route a session's GET and command POST on ``app`` to ``server``'s sessions."""

    async def status(request: web.Request) -> web.Response:
        return web.json_response(state_of(server, own_session(server, request)))

    async def command(request: web.Request) -> web.Response:
        session = own_session(server, request)
        if (request.content_length or 0) > _MAX_COMMAND_BYTES:
            raise web.HTTPRequestEntityTooLarge(max_size=_MAX_COMMAND_BYTES,
                                                actual_size=request.content_length or 0)
        try:
            body = json.loads(await request.read() or b"null")
        except ValueError:
            raise web.HTTPBadRequest(text="the command must be JSON") from None
        verb = body.get("command") if isinstance(body, dict) else None
        if verb == "select" and isinstance(body.get("identity"), str):
            names = server.names_for(session)
            if body["identity"] not in names:
                raise web.HTTPNotFound(text=f"no identity {body['identity']!r} on this server "
                                       f"(known: {', '.join(names)})")
            cmd: Any = SelectIdentity(body["identity"])
        elif verb == "bypass" and isinstance(body.get("on"), bool):
            cmd = SetBypass(body["on"])
        else:
            raise web.HTTPBadRequest(text='commands: {"command": "select", "identity": NAME} '
                                     'or {"command": "bypass", "on": true|false}')
        app_ = server.stream_app(session)
        if app_ is None:
            raise web.HTTPConflict(text="the session's stream has not started yet (it starts "
                                   "with the first frame); try again")
        if not app_.commands.put(cmd, timeout_s=1.0):
            raise web.HTTPServiceUnavailable(text="the session's stream is not taking commands")
        return web.json_response(state_of(server, session), status=HTTPStatus.OK)

    app.router.add_get("/whip/{session}", status)
    app.router.add_post("/whip/{session}/command", command)


def own_session(server: WhipServer, request: web.Request) -> Session:
    """The session the request's path names, if it is the user's own (else 404; 401 without a
    known token)."""
    user = server.user_of(request)
    session = server.sessions().get(request.match_info["session"])
    if session is None or session.user != user:  # another's is as unknown as none
        raise web.HTTPNotFound(text="no such session")
    return session


def state_of(server: WhipServer, session: Session) -> dict[str, Any]:
    """The session's state as its routes answer it."""
    app_ = server.stream_app(session)
    state = app_.state if app_ is not None else None
    return {"session": session.id, "user": session.user, "stream": session.stream,
            "identity": state.active_identity if state is not None else None,
            "bypass": state.bypass if state is not None else False,
            "identities": list(server.names_for(session))}

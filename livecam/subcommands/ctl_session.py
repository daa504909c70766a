"""``livecam ctl --session LOCATION``: one WHIP session's own controls on a `livecam serve`
(:mod:`livecam.remote.session_api`), with that session's user's WHIP token."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from livecam.core.errors import LivecamError, UsageError

#: what ``--session`` can do: the session's user's controls, not the operator's
SESSION_ACTIONS = ("status", "select", "bypass")


class SessionError(LivecamError, RuntimeError):
    """The server refused or did not answer a session's command."""


def _token(args: argparse.Namespace) -> str:
    path = getattr(args, "session_token_file", None)
    token = (Path(path).read_text().strip() if path
             else os.environ.get("LIVECAM_REMOTE_TOKEN", "").strip())
    if not token:
        raise UsageError("--session needs the session's WHIP token: --session-token-file FILE "
                         "or LIVECAM_REMOTE_TOKEN (`livecam serve token add NAME` printed it)")
    return token


def _call(url: str, token: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    req = urllib.request.Request(url, data=data, headers=headers,
                                 method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            reply = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        said = exc.read().decode(errors="replace").strip().splitlines()
        raise SessionError(f"session {url}: {exc.code} {said[0] if said else exc.reason}"
                           ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SessionError(f"session {url}: no answer ({getattr(exc, 'reason', exc)}): is "
                           "`livecam serve` running there, and the session still open?"
                           ) from None
    if not isinstance(reply, dict):
        raise SessionError(f"session {url}: the answer is not a session's state")
    return reply


def run_session(args: argparse.Namespace) -> int:
    """Act on the session at ``args.session`` (its Location URL); prints its state."""
    location = str(args.session).rstrip("/")
    if not location.startswith(("http://", "https://")) or "/whip/" not in location:
        raise UsageError(f"--session {location!r}: give the session's Location, "
                         "http(s)://HOST:PORT/whip/ID")
    if args.action not in SESSION_ACTIONS:
        raise UsageError(f"--session takes {', '.join(SESSION_ACTIONS)} (the session's own "
                         f"controls), not {args.action}")
    token = _token(args)
    if args.action == "status":
        state = _call(location, token)
    elif args.action == "select":
        if not args.name or args.number is not None:
            raise UsageError("--session select takes an identity NAME of the server")
        state = _call(location + "/command", token, {"command": "select", "identity": args.name})
    else:
        on = (not _call(location, token)["bypass"]) if args.mode == "toggle" else args.mode == "on"
        state = _call(location + "/command", token, {"command": "bypass", "on": on})
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        print(f"session {state.get('session', '?')[:8]} ({state.get('user')}): identity "
              f"{state.get('identity') or 'none'}, bypass {'on' if state.get('bypass') else 'off'}")
    return 0

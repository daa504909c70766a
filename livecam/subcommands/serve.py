"""``livecam serve``: the whole pipeline for remote cameras over WebRTC (WHIP), and the users'
tokens (``livecam serve token add|remove|list``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from livecam.subcommands.common import accept_after_verb, command_parser, config_from_args

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.remote.tokens import TokenStore

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, run,
        "serve", help="swap faces for remote cameras over WebRTC (WHIP endpoint)",
        description="Own the pipeline and take remote cameras over WebRTC: any WHIP client "
        "(OBS 30+, a browser, `livecam run --remote`) POSTs its SDP offer with "
        "`Authorization: Bearer TOKEN` to http(s)://HOST:PORT/whip (advanced.serve.address) and "
        "gets its swapped video back on the same video transceiver. Audio is refused (answered "
        "inactive). Each session is a stream of the one pipeline; limits "
        "(advanced.serve.max_sessions, max_width_px, max_height_px, max_fps) are checked when the "
        "offer arrives. Plain HTTP only on loopback: set advanced.serve.tls_cert/tls_key for any "
        "other address. Users' tokens: `livecam serve token add NAME`. The control API (`livecam "
        "ctl stream list`, /metrics) runs beside it as for `livecam run`.")
    p.add_argument("--identity", help="identity every session starts with (a session may "
                   "pick another with ?identity=NAME on the WHIP URL)")
    verbs = p.add_subparsers(dest="serve_verb", metavar="token")
    tok = verbs.add_parser("token", help="add, remove or list the users' WHIP tokens")
    tok.add_argument("token_action", choices=("add", "remove", "list"))
    tok.add_argument("name", nargs="?", help="the user (add, remove)")
    accept_after_verb(p, verbs)


def run(args: argparse.Namespace) -> int:
    from livecam.core.errors import UsageError
    from livecam.remote.tokens import TokenStore, tokens_path

    config = config_from_args(args)
    tokens = TokenStore(tokens_path(config.serve.tokens_file))
    if args.serve_verb == "token":
        if args.token_action == "list":
            for name in tokens.names():
                print(name)
            return 0
        if not args.name:
            raise UsageError(f"serve token {args.token_action} needs the user's NAME")
        if args.token_action == "add":
            print(tokens.add(args.name))  # shown once: only its hash is kept
            return 0
        tokens.remove(args.name)
        return 0
    return _serve(args, config, tokens)


def _serve(args: argparse.Namespace, config: Config, tokens: TokenStore) -> int:
    import signal

    from livecam.app import build_streams
    from livecam.control.catalog import LibraryCatalog
    from livecam.core.errors import UsageError
    from livecam.core.types import RuntimeState
    from livecam.identity import IdentityCollection, IdentityLibrary
    from livecam.remote.photos import SessionPhotos, default_photo_dir
    from livecam.remote.whip import WhipServer

    names = tuple(LibraryCatalog(config.identity).names())
    if args.identity is not None and args.identity not in names:
        raise UsageError(f"--identity {args.identity!r}: no such identity (known: "
                         f"{', '.join(names) or 'none yet'})")
    if not tokens.names():
        log.warning("no WHIP user yet: every offer will get 401; add one with `livecam "
                    "serve token add NAME`")
    state = RuntimeState(active_identity=args.identity, identities=names)
    serve = config.serve
    photos = SessionPhotos(Path(serve.photo_dir).expanduser() if serve.photo_dir
                           else default_photo_dir(), config.identity,
                           max_bytes=serve.max_photo_bytes, keep_s=serve.photo_keep_s)
    # the sessions' uploaded photos first, then the library
    identities = IdentityCollection(photos.identities, IdentityLibrary.from_config(
        config.identity))
    streams = build_streams(config, pairs=[], state=state, hotkeys=False, api_required=False,
                            hold_open=True, gpu_streams=serve.max_sessions,
                            identities=identities)
    streams.controls.append(WhipServer(config, streams, tokens, identities=names,
                                       photos=photos))
    signal.signal(signal.SIGTERM, lambda *_: streams.request_stop())
    try:
        streams.run()
    except KeyboardInterrupt:
        log.info("interrupted")
    log.info("done: %s", streams.summary().line())
    return 0

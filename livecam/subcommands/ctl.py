"""``livecam ctl``: control a running ``livecam run`` or ``livecam daemon`` through its API."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from livecam.core.errors import LivecamError
from livecam.subcommands.common import accept_after_verb, command_parser, overrides_of
from livecam.subcommands.ctl_client import (
    STATUS_KEYS,
    base_url,
    checked_base,
    is_command_reply,
    is_identities,
    is_status,
    json_reply,
    not_livecam,
    request,
)

#: A command's reply comes once the pipeline took it or after the server's wait for that
#: (advanced.control.apply_wait_s, 2 s by default); this much more is allowed for the answer itself.
_COMMAND_MARGIN_S = 3.0
#: A reload's reply comes once the reload ended, or after advanced.control.apply_wait_s (applied) +
#: 5 s (reloaded): wait for that answer rather than report a timeout.
_RELOAD_MARGIN_S = 13.0
_NOT_APPLIED = ("(not taken within advanced.control.apply_wait_s: the pipeline takes it at its "
                "next frame; is it stuck or very slow?)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, run,
        "ctl", help="control a running livecam (select, next, bypass, status, ...)",
        description="Send a command to a running `livecam run` or `livecam daemon` through its "
        "control API. The address and token file come from the same config (control.api_address"
        ", advanced.control.token_file) or from --url/--token-file. The token itself is never "
        "sent: the server first proves it holds it, then each request is signed with it. Exits 1 "
        "when no livecam answers (or not within 5 s), what answers cannot prove it holds the "
        "token, the request is refused, the stream has stopped or a reload failed (its config "
        "file does not load: the previous config stays), 2 for an unknown identity or a bad "
        "argument.")
    p.add_argument("--url", help="API base URL (default: from control.api_address)")
    p.add_argument("--token-file", help="token file (default: from advanced.control.token_file)")
    p.add_argument("--json", action="store_true", help="print the server's JSON reply")
    p.add_argument("--stream", type=int, metavar="K",
                   help="act on stream K only (0 = the first --input/--output pair) when "
                   "livecam runs several; without it a command goes to every stream and "
                   "status shows stream 0 and a line per stream")
    p.add_argument("--session", metavar="LOCATION",
                   help="act on one `livecam serve` WHIP session instead (its Location, "
                   "http(s)://HOST:PORT/whip/ID) with that session's WHIP token: status, "
                   "select NAME and bypass only")
    p.add_argument("--session-token-file", metavar="FILE",
                   help="the session's WHIP token (default: LIVECAM_REMOTE_TOKEN)")
    acts = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    acts.required = True
    acts.add_parser("status", help="fps, latency, identity, tracks, backend")
    acts.add_parser("identities", help="list the identities with their hotkey numbers")
    sel = acts.add_parser("select", help="select an identity by name or --number")
    sel.add_argument("name", nargs="?", help="identity name (`none` = swap nothing)")
    sel.add_argument("--number", type=int, help="1 = first identity (as hotkey 1)")
    acts.add_parser("next", help="next identity")
    acts.add_parser("prev", help="previous identity")
    byp = acts.add_parser("bypass", help="show the real face (on) or swap again (off)")
    byp.add_argument("mode", choices=("on", "off", "toggle"))
    asg = acts.add_parser("assign", help="give track TRACK its own identity (`none` clears)")
    asg.add_argument("track", type=int)
    asg.add_argument("name")
    dly = acts.add_parser("delay", help="set the A/V delay: frames go out MS after capture "
                          "(0 = at once; match it with the microphone's delay in OBS)")
    dly.add_argument("ms", type=float, metavar="MS", help="0 to 2000")
    acts.add_parser("reload", help="re-read the config file and the identity library; "
                    "says how it ended (exit 1 if the config does not load)")
    acts.add_parser("snapshot", help="save the current output frame (prints the path)")
    acts.add_parser("quit", help="stop livecam")
    acts.add_parser("metrics", help="print the Prometheus metrics text")
    acts.add_parser("panel-url", help="print the panel URL with the token (for an OBS dock)")
    stm = acts.add_parser("stream", help="list, add or remove streams while livecam runs")
    stm.add_argument("stream_action", choices=("list", "add", "remove"), metavar="list|add|remove")
    stm.add_argument("operands", nargs="*", metavar="ARG",
                     help="add INPUT OUTPUT (the specs of `livecam run --input/--output`; "
                     "prints the new stream's id) | remove K | list")
    accept_after_verb(p, acts)


def _print_state(reply: dict[str, Any]) -> None:
    state = reply.get("state", reply)
    print(f"identity: {state.get('active_identity') or 'none'}  bypass: "
          f"{'on' if state.get('bypass') else 'off'}")
    if not reply.get("applied", True):
        print(_NOT_APPLIED, file=sys.stderr)


def _reload_of(reply: dict[str, Any]) -> dict[str, str]:
    """The ``reload`` part of a command reply (none for other commands)."""
    outcome = reply.get("reload")
    if not isinstance(outcome, dict):
        return {"status": "", "message": ""}
    return {"status": str(outcome.get("status", "")), "message": str(outcome.get("message", ""))}


def _print_reload(reply: dict[str, Any]) -> None:
    """How the reload ended: a failure raises (one line, exit 1); a reload still going on is
    said on stderr, never as a success."""
    outcome = _reload_of(reply)
    if outcome["status"] == "failed":
        raise LivecamError(outcome["message"])
    if outcome["status"] == "reloaded":
        print(outcome["message"])
    elif outcome["message"] and reply.get("applied", True):  # else the state line says so
        print(outcome["message"], file=sys.stderr)


def _print_status(s: dict[str, Any]) -> None:
    if not s.keys() >= STATUS_KEYS:
        print("no stream is running")
        return
    lat = s["latency_ms"]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    tracks = ", ".join(f"{t['track_id']}->{t['identity'] or '-'}" for t in s["tracks"])
    print(f"identity: {s['active_identity'] or 'none'}  bypass: "
          f"{'on' if s['bypass'] else 'off'}")
    if s.get("passthrough_reason"):  # the real face is sent: said, not only in the start log
        print(f"PASSTHROUGH: {s['passthrough_reason']}")
    print(f"fps: in {s['fps_in']:.1f} out {s['fps_out']:.1f}  latency p50 {ms(lat['p50'])} ms "
          f"p99 {ms(lat['p99'])} ms")
    print(f"tracks: {tracks or 'none'}")
    print(f"identities: {', '.join(s['identities']) or 'none'}")
    print(f"backend: {s['backend']}  output: {s['output']} {s['width']}x{s['height']} "
          f"@ {s['fps']:g}")
    frames = s["frames"]
    dropped = sum(frames.get(k, 0) for k in ("dropped_capture", "dropped_pipeline",
                                              "dropped_output"))
    print(f"frames: {frames['sent']} sent, {dropped} dropped; A/V delay "
          f"{s.get('delay_ms', 0):g} ms")
    overload = s.get("overload") or {}
    if overload.get("active"):
        print(f"OVERLOADED: {overload.get('reason')}")
    streams = s.get("streams") or []
    if len(streams) > 1:
        print(f"streams: {len(streams)} (this is stream {s.get('stream', 0)})")
        for b in streams:
            lat_b = b.get("latency_ms") or {}
            print(f"  {b['stream']}: {b['input']} -> {b['output']}  fps {b['fps_out']:.1f}  "
                  f"p99 {ms(lat_b.get('p99'))} ms  identity "
                  f"{b['active_identity'] or 'none'}{'  BYPASS' if b['bypass'] else ''}"
                  f"{'  OVERLOADED' if b['overloaded'] else ''}"
                  f"{'  STOPPED' if b.get('stopped') else ''}")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from livecam.config import load_config
    from livecam.control.auth import read_token, token_path
    from livecam.core.errors import UsageError

    if getattr(args, "session", None):
        from livecam.subcommands.ctl_session import run_session

        return run_session(args)
    config = load_config(args.config, overrides_of(args))
    base = checked_base(args.url or base_url(config.control.api_address))
    token = read_token(Path(args.token_file) if args.token_file
                       else token_path(config.control.token_file))
    action = args.action
    if args.stream is not None and args.stream < 0:
        raise UsageError("--stream must be 0 or more (0 = the first stream)")
    query = "" if args.stream is None else f"?stream={args.stream}"
    if action == "panel-url":
        stream = "" if args.stream is None else f"&stream={args.stream}"
        print(f"{base}/panel?token={token}{stream}")
        return 0
    if action == "stream":
        from livecam.subcommands.ctl_streams import stream_verb

        return stream_verb(base, token, args.stream_action, list(args.operands))
    if action in ("status", "identities", "metrics"):
        path = {"status": "/api/status", "identities": "/api/identities",
                "metrics": "/metrics"}[action]
        url = base + path + query
        raw = request(url, token)
        if action == "metrics":
            if b"livecam_" not in raw:
                raise not_livecam(url, "its answer holds no livecam metrics")
            sys.stdout.write(raw.decode(errors="replace"))
            return 0
        reply = json_reply(raw, url, is_status if action == "status" else is_identities)
        if args.json:
            print(raw.decode())
        elif action == "status":
            _print_status(reply)
        else:
            for item in reply:
                print(f"{item['index'] + 1}  {item['name']}")
        return 0
    body: dict[str, Any] = {}
    if action == "select":
        if args.number is not None:
            body = {"index": args.number - 1}
        elif args.name is not None:
            body = {"name": None if args.name == "none" else args.name}
        else:
            raise UsageError("select needs a NAME or --number N")
    elif action == "bypass":
        body = {} if args.mode == "toggle" else {"on": args.mode == "on"}
    elif action == "assign":
        body = {"track_id": args.track, "name": None if args.name == "none" else args.name}
    elif action == "delay":
        body = {"ms": args.ms}
    url = f"{base}/api/{action}{query}"
    timeout_s = config.control.apply_wait_s + (
        _RELOAD_MARGIN_S if action == "reload" else _COMMAND_MARGIN_S)
    reply = json_reply(request(url, token, "POST", body, timeout_s), url,
                        lambda v: is_command_reply(v)
                        and (action != "snapshot" or isinstance(v.get("path"), str)))
    if args.json:
        print(json.dumps(reply))
        return 1 if _reload_of(reply)["status"] == "failed" else 0
    if action == "reload":
        _print_reload(reply)  # then the state, as for the other commands
    if action == "snapshot":  # one file per stream it went to
        for path in reply.get("paths") or [reply["path"]]:
            print(path)
    elif action == "delay":
        print(f"A/V delay: {reply.get('delay_ms', args.ms):g} ms")
        if not reply.get("applied", True):
            print(_NOT_APPLIED, file=sys.stderr)
    else:
        _print_state(reply)
    return 0


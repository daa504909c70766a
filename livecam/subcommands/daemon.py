"""``livecam daemon``: the live pipeline without a terminal, for servers and systemd."""

from __future__ import annotations

import argparse

from livecam.subcommands.common import config_from_args
from livecam.subcommands.run import add_run_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "daemon",
        help="run headless: control API, JSON logs, signals (systemd)",
        description="Run the live pipeline headless, controlled through the control API "
        "(`livecam ctl`, the panel). Logs are JSON lines on stderr (`logging: {json: false}` in "
        "the config file or --set advanced.logging.json=false for plain text; what libraries "
        "print is logged too). SIGTERM/SIGINT stop it within a second (exit 0); SIGHUP reloads the "
        "config file and the identity library. A lock file per camera, virtual camera, output "
        "file and input pipe keeps a second livecam off the same device. A camera that is "
        "missing or unplugged is retried while the output keeps sending. See docs/control.md "
        "for a systemd unit.",
    )
    add_run_options(p)
    # the process ends right after a clean stop, skipping the interpreter's teardown
    p.set_defaults(func=run, exit_without_teardown=True)


def run(args: argparse.Namespace) -> int:
    from livecam.daemon.lock import lock_for_run
    from livecam.daemon.service import serve
    from livecam.subcommands.run import build_from_args, stream_pairs

    # structured logs by default; the config file's advanced.logging.json or a --set still wins
    args.config_defaults = ["advanced.logging.json=true"]
    config = config_from_args(args)
    pairs = stream_pairs(args, config)
    with lock_for_run(config, pairs):
        # cli.main exits without teardown after this: the stop need not free the stages
        serve(lambda: build_from_args(args, config, daemon=True, pairs=pairs), exiting=True)
    return 0

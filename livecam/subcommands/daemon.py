"""``livecam daemon``: the live pipeline without a terminal, for servers and systemd."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from livecam.subcommands.common import config_from_args
from livecam.subcommands.run import add_run_options

log = logging.getLogger("livecam")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "daemon",
        help="run headless: control API, JSON logs, signals (systemd)",
        description="Run the live pipeline headless, controlled through the control API "
        "(`livecam ctl`, the panel). Logs are JSON lines on stderr (--set logging.json=false "
        "for plain text). SIGTERM/SIGINT stop it within a second (exit 0); SIGHUP reloads the "
        "config file and the identity library. A lock file per camera and virtual camera "
        "keeps a second instance off the same device. A camera that is missing or unplugged "
        "is retried while the output keeps sending. See docs/control.md for a systemd unit.",
    )
    add_run_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from livecam.daemon.lock import DeviceLock, default_lock_dir, device_keys
    from livecam.daemon.service import serve
    from livecam.subcommands.run import build_from_args

    # structured logs by default; a later --set logging.json=false still wins
    args.overrides = ["logging.json=true", *args.overrides]
    config = config_from_args(args)
    configured = config.control.lock_dir
    lock_dir = Path(configured).expanduser() if configured else default_lock_dir()
    lock = DeviceLock(device_keys(args.input, args.output, output_device=config.output.device,
                                  output_backend=config.output.backend), lock_dir)
    lock.acquire()
    try:
        app = build_from_args(args, config, daemon=True)
        reason = serve(app)
    finally:
        lock.release()
    log.info("daemon exiting (%s): %s", reason, app.summary().line())
    return 0

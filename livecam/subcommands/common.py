"""Options shared by subcommands: ``--config``, ``--set``, ``--log-level``; logging set-up
(:mod:`livecam.subcommands.logs`)."""

from __future__ import annotations

import argparse
import copy
import logging
import logging.handlers
from collections.abc import Callable
from typing import Any

from livecam.config import Config, load_config
from livecam.subcommands.logs import setup_logging


def command_parser(sub: argparse._SubParsersAction, run: Callable[[argparse.Namespace], int],
                   name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (``kwargs``: ``help``, ``description``, as
    ``add_parser`` takes them) with the config options (:func:`add_config_options`), which
    runs ``run(args)``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    add_config_options(parser)
    parser.set_defaults(func=run)
    return parser


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML config file (see config.yaml for "
                        "every key and its default)")
    parser.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append",
                        default=[], help="override one config key, e.g. --set capture.fps=60 "
                        "(repeatable)")
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="log level (default: logging.level from the config)")


def accept_after_verb(parser: argparse.ArgumentParser, verbs: Any) -> None:
    """Let the options of ``parser`` (a subcommand with verbs) come after its verb too, as
    users type them (`livecam ctl status --stream 1`, `livecam models import NAME PATH --set
    ...`): each verb's parser (``verbs``, its subparsers action) gets a copy of them that sets
    nothing unless given, so either place works. A verb's own option of the same name stays
    the verb's. ``--set`` after the verb adds to those before it (:func:`overrides_of`)."""
    for verb in verbs.choices.values():
        for action in parser._actions:  # argparse has no public way to copy an option
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            if any(option in verb._option_string_actions for option in action.option_strings):
                continue
            twin = copy.copy(action)
            twin.default = argparse.SUPPRESS
            if twin.dest == "overrides":
                twin.dest = "verb_overrides"
            verb._add_action(twin)


def overrides_of(args: argparse.Namespace) -> list[str]:
    """The ``--set`` values given before and after a verb, in that order."""
    return [*getattr(args, "overrides", []), *getattr(args, "verb_overrides", [])]


def config_from_args(args: argparse.Namespace) -> Config:
    """Load the config named by the options and set up logging from it."""
    overrides = overrides_of(args)
    if getattr(args, "log_level", None):
        overrides.append(f"logging.level={args.log_level}")
    # warnings of the load (an old key name) wait for the logging the config sets up, so a
    # daemon's first lines are JSON too
    held = logging.handlers.BufferingHandler(capacity=1_000)
    root = logging.getLogger()
    root.addHandler(held)
    try:
        config = load_config(args.config, overrides, getattr(args, "config_defaults", ()))
    finally:
        root.removeHandler(held)
    setup_logging(config.logging.level, json_lines=config.logging.json)
    for record in held.buffer:
        logging.getLogger(record.name).handle(record)
    return config

"""Options shared by subcommands: ``--config``, ``--set``, ``--log-level``; logging set-up
(:mod:`livecam.subcommands.logs`)."""

from __future__ import annotations

import argparse

from livecam.config import Config, load_config
from livecam.subcommands.logs import setup_logging


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML config file (see config.yaml for "
                        "every key and its default)")
    parser.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append",
                        default=[], help="override one config key, e.g. --set capture.fps=60 "
                        "(repeatable)")
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="log level (default: logging.level from the config)")


def config_from_args(args: argparse.Namespace) -> Config:
    """Load the config named by the options and set up logging from it."""
    overrides = list(args.overrides)
    if getattr(args, "log_level", None):
        overrides.append(f"logging.level={args.log_level}")
    config = load_config(args.config, overrides, getattr(args, "config_defaults", ()))
    setup_logging(config.logging.level, json_lines=config.logging.json)
    return config

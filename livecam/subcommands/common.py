"""Options shared by subcommands: ``--config``, ``--set``, ``--log-level``; logging set-up."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from livecam.config import Config, load_config


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
    config = load_config(args.config, overrides)
    setup_logging(config.logging.level, json_lines=config.logging.json)
    return config


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "t": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(level: str, *, json_lines: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(_JsonFormatter())
    else:
        fmt = logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        fmt.converter = time.localtime
        handler.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)

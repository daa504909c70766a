"""The ``livecam`` command line. The only module that calls ``sys.exit``.

Each subcommand lives in ``livecam/subcommands/<name>.py`` with ``add_parser(subparsers)`` and
``run(args) -> int``. Those modules import heavy packages (mediapipe, torch, av) inside ``run``,
so ``livecam --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from livecam import __version__
from livecam.core.errors import ConfigError, LivecamError, UsageError

# Order is the order shown by --help.
SUBCOMMANDS = ("run", "demo", "identity", "daemon", "serve", "ctl", "analyze", "models",
               "engines", "doctor", "config")

log = logging.getLogger("livecam")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="livecam",
        description="Real-time face swap into a virtual camera (OBS, Zoom, Meet).",
        epilog="Run `livecam COMMAND --help` for a command's options. "
        "Start with `livecam doctor`, then `livecam demo`.",
    )
    parser.add_argument("--version", action="version", version=f"livecam {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"livecam.subcommands.{name}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        sys.exit(2)
    try:
        code = args.func(args)
    except (ConfigError, UsageError) as exc:
        _report(exc)
        sys.exit(2)
    except LivecamError as exc:
        _report(exc)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        from livecam.core.files import disk_error_line

        line = disk_error_line(exc)
        if line is None:
            raise
        print(f"livecam: error: {line}", file=sys.stderr)
        sys.exit(1)
    # `livecam daemon` and `run`: a stop in < 1 s; only as the process's own command (argv
    # None), never for a caller that runs a command in its process (tests)
    if argv is None and getattr(args, "exit_without_teardown", False):
        from livecam.daemon.service import exit_without_teardown

        exit_without_teardown(code)
    _exit(code)


def _exit(code: int) -> None:
    """``sys.exit(code)``; or, where a capture thread was left blocked in a read, the same
    exit without the interpreter's teardown (that thread, inside a decoder's C code, can
    crash the teardown: a Ctrl-C'd listening RTMP run exited by SIGSEGV after its "done"
    line). Logs and standard streams are flushed first; the run's sink is closed already."""
    from livecam.capture.thread import threads_left_blocked

    if threads_left_blocked():
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _report(exc: LivecamError) -> None:
    """The one line of an error that ends the command: a JSON ERROR record of the
    ``livecam`` logger where ``advanced.logging.json`` is on (a log collector parses every line),
    else plain text on stderr."""
    from livecam.subcommands.logs import JsonFormatter

    if any(isinstance(h.formatter, JsonFormatter) for h in logging.getLogger().handlers):
        log.error("livecam: error: %s", exc)
    else:
        print(f"livecam: error: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()

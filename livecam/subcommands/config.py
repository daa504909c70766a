"""``livecam config``: the config in effect (defaults < ``--config`` < ``--set``) as YAML.

Shows the streamer keys by default and every key with ``--advanced``; the output is a valid
config file (each key with its meaning), so ``livecam config --advanced > my.yaml`` starts one.
"""

from __future__ import annotations

import argparse

from livecam.subcommands.common import command_parser, config_from_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, run, "config",
                       help="show the config in effect (streamer keys; --advanced: all)",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--advanced", action="store_true",
                   help="also show the tuning knobs under `advanced:`")


def run(args: argparse.Namespace) -> int:
    from livecam.config.document import render

    print(render(config_from_args(args), advanced=args.advanced), end="")
    return 0

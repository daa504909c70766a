"""One module per ``livecam`` subcommand: ``add_parser(subparsers)`` and ``run(args) -> int``."""

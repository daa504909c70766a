"""``livecam run``: capture → swap → virtual camera (or file, window, null)."""

from __future__ import annotations

import argparse
import logging

from livecam.capture import INPUT_HELP
from livecam.output import OUTPUT_HELP
from livecam.subcommands.common import add_config_options, config_from_args

log = logging.getLogger("livecam")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the live pipeline into a virtual camera, file or window",
        description="Capture frames, swap faces and send the result to a virtual camera (pick "
        "'livecam' as the camera in OBS, Zoom or Meet), a video file or a preview window. "
        "Stops on Ctrl-C, after --frames output frames, or at the end of a non-looping file.",
    )
    p.add_argument("--input", default="camera:0", metavar="SPEC",
                   help=f"where frames come from: {INPUT_HELP} (default: camera:0)")
    p.add_argument("--output", default="virtualcam", metavar="SPEC",
                   help=f"where frames go: {OUTPUT_HELP} (default: virtualcam)")
    p.add_argument("--frames", type=int, metavar="N",
                   help="stop after N frames have been sent to the output")
    add_config_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from livecam.app import build_app
    from livecam.errors import UsageError

    if args.frames is not None and args.frames < 1:
        raise UsageError("--frames must be at least 1")
    config = config_from_args(args)
    app = build_app(config, input_spec=args.input, output_spec=args.output,
                    max_frames=args.frames)
    try:
        app.run()
    except KeyboardInterrupt:
        log.info("interrupted")
    snap = app.metrics.snapshot()
    log.info("done: %d frames sent; %s", app.metrics.counter("sent"), snap.status_line())
    return 0

"""``livecam run``: capture → swap → virtual camera (or file, window, null)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from livecam.capture import INPUT_HELP
from livecam.output import OUTPUT_HELP
from livecam.subcommands.common import add_config_options, config_from_args

if TYPE_CHECKING:
    from livecam.app import RemoteSwap, StreamSet
    from livecam.config import Config

log = logging.getLogger("livecam")

#: The name ``--source PHOTO`` gives its one-off identity (hotkeys and `ctl` see it first).
ONE_OFF_NAME = "source"


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``livecam run`` and ``livecam daemon``."""
    p.add_argument("--input", action="append", metavar="SPEC",
                   help=f"where frames come from: {INPUT_HELP} (default: camera:0). Repeat "
                   "it with --output for several streams in one process: the k-th --input "
                   "goes to the k-th --output (or list them under `streams:` in the config)")
    p.add_argument("--output", action="append", metavar="SPEC",
                   help=f"where frames go: {OUTPUT_HELP} (default: virtualcam); one per "
                   "--input")
    p.add_argument("--identity", metavar="NAME",
                   help="identity to swap in from the start (see `livecam identity list`); "
                   "switch later with hotkeys, the panel or `livecam ctl select`")
    p.add_argument("--source", metavar="PHOTO",
                   help="a one-off source face from PHOTO (not stored in the library), active "
                   "from the start; `livecam identity add` keeps one for later runs. With "
                   "--remote, the JPEG or PNG is uploaded to the server as the session's "
                   "identity")
    add_config_options(p)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the live pipeline into a virtual camera, file or window",
        description="Capture frames, swap faces and send the result to a virtual camera (pick "
        "'livecam' as the camera in OBS, Zoom or Meet), a video file or a preview window. "
        "Stops on Ctrl-C, after --frames output frames, or at the end of a non-looping file or "
        "a pipe. "
        "Hotkeys, the preview window's keys and the control API (`livecam ctl`) switch "
        "identities while it runs. Like `livecam daemon`, it refuses a camera, virtual camera "
        "or output file that another livecam is using.",
    )
    add_run_options(p)
    p.add_argument("--frames", type=int, metavar="N",
                   help="stop after N frames have been sent to the output")
    p.add_argument("--remote", metavar="URL",
                   help="thin client: swap on a `livecam serve` at URL (its WHIP endpoint, "
                   "http(s)://HOST:PORT/whip) instead of here; the output shows a cover card "
                   "(never the camera) while the link is down, and it reconnects with backoff. "
                   "The token comes from --remote-token-file or LIVECAM_REMOTE_TOKEN")
    p.add_argument("--remote-token-file", metavar="FILE",
                   help="file holding the WHIP token (`livecam serve token add NAME` on the "
                   "server printed it)")
    # like the daemon: a stop's exit leaves out the interpreter's teardown and the kernel's
    # unmapping of the memory, which took 1-3 s after the "done" line on busy cores
    p.set_defaults(func=run, exit_without_teardown=True)


def stream_pairs(args: argparse.Namespace, config: Config) -> list[tuple[str, str]]:
    """The (input, output) specs of the run: the k-th ``--input`` with the k-th ``--output``,
    else the config's ``streams``, else camera:0 → virtualcam. Raises :class:`UsageError`
    when the counts do not pair up or two streams show a window, :class:`ConfigError` for a
    bad ``streams`` entry; either for more streams than ``advanced.pipeline.max_streams``."""
    from livecam.core.errors import ConfigError, UsageError

    inputs, outputs = list(args.input or []), list(args.output or [])
    if inputs or outputs:
        if len(inputs) <= 1 and len(outputs) <= 1:
            return [(inputs[0] if inputs else "camera:0",
                     outputs[0] if outputs else "virtualcam")]
        if len(inputs) != len(outputs):
            raise UsageError(f"{len(inputs)} --input and {len(outputs)} --output: give one "
                             "--output per --input (the k-th input goes to the k-th output)")
        _check_count(len(inputs), f"{len(inputs)} --input/--output pairs", config, UsageError)
        return _one_window(list(zip(inputs, outputs, strict=True)))
    # counted before any entry is read: a huge list is refused without walking it
    _check_count(len(config.streams), "config streams", config, ConfigError)
    pairs = []
    for k, entry in enumerate(config.streams):
        if set(entry) != {"input", "output"}:
            raise ConfigError(f"streams[{k}]: expected the keys input and output, got "
                              f"{', '.join(sorted(entry)) or 'none'}")
        pairs.append((entry["input"], entry["output"]))
    return _one_window(pairs) or [("camera:0", "virtualcam")]


def _one_window(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``pairs``, refused (:class:`UsageError`) when two streams show a preview window."""
    from livecam.core.errors import UsageError

    windows = [k for k, (_, output) in enumerate(pairs) if output.partition(":")[0] == "window"]
    if len(windows) > 1:
        raise UsageError(f"output window is named by two streams ({windows[0]} and "
                         f"{windows[1]}): one preview window per process (it is drawn by "
                         "livecam's main thread); send the other streams to virtualcam, "
                         "file:PATH or null")
    return pairs


def _check_count(n: int, where: str, config: Config, error: type[Exception]) -> None:
    limit = config.pipeline.max_streams
    if n > limit:
        raise error(f"{n} streams ({where}) in one process, more than "
                    f"advanced.pipeline.max_streams ({limit}): each stream holds its own capture, "
                    "face models and frame buffers; run fewer, or raise "
                    "advanced.pipeline.max_streams if this machine holds them")


def build_from_args(args: argparse.Namespace, config: Config, *, daemon: bool,
                    pairs: list[tuple[str, str]] | None = None) -> StreamSet:
    """The streams for ``run``/``daemon`` options (``pairs``: :func:`stream_pairs`): controls
    on, hotkeys only outside the daemon, reloads re-reading the same ``--config``/``--set``."""
    from livecam.app import build_streams
    from livecam.control.catalog import LibraryCatalog
    from livecam.core.errors import UsageError
    from livecam.core.types import RuntimeState

    if getattr(args, "remote", None):
        return _remote_streams(args, config, pairs or stream_pairs(args, config))
    names = tuple(LibraryCatalog(config.identity).names())
    if args.identity is not None and args.identity not in names:
        known = ", ".join(names) or "none yet"
        raise UsageError(f"--identity {args.identity!r}: no such identity (known: {known}); "
                         f"add it with `livecam identity add {args.identity} PHOTO`")
    active = args.identity
    identities = None
    if getattr(args, "source", None):
        from livecam.identity import IdentityCollection, IdentityLibrary, identity_from_photo

        if args.identity is not None:
            raise UsageError("use either --identity NAME or --source PHOTO, not both")
        one_off = identity_from_photo(args.source, config.identity, name=ONE_OFF_NAME)
        identities = IdentityCollection({ONE_OFF_NAME: one_off},
                                        IdentityLibrary.from_config(config.identity))
        active, names = ONE_OFF_NAME, (ONE_OFF_NAME, *names)
    else:
        from livecam.identity.last_used import choose_default, remember

        if active is None:
            active = choose_default(config.identity, names)
        if active is not None:
            remember(config.identity, active)
    state = RuntimeState(active_identity=active, identities=names)
    overrides = list(args.overrides)
    pairs = pairs or stream_pairs(args, config)
    return build_streams(config, pairs=pairs,
                         identities=identities, max_frames=getattr(args, "frames", None),
                         state=state, hotkeys=not daemon, api_required=daemon,
                         wait_for_source=daemon,
                         config_loader=_config_reloader(args, overrides))


def _remote_streams(args: argparse.Namespace, config: Config,
                    pairs: list[tuple[str, str]]) -> StreamSet:
    """The thin client's one stream (``--remote URL``): its stage swaps on the server, the
    local hotkeys, preview keys and control API act on the server's session through it
    (``--identity`` names one of the server's identities, ``--source PHOTO`` is uploaded to
    each session as its identity; this machine's library is not read)."""
    from livecam.app import build_remote_streams
    from livecam.core.errors import UsageError

    photo = None
    if getattr(args, "source", None):
        if args.identity is not None:
            raise UsageError("use either --identity NAME or --source PHOTO, not both")
        photo = _remote_photo(args.source, config.serve.max_photo_bytes)
    remote = _remote_swap(args, len(pairs), photo)
    return build_remote_streams(config, pairs=pairs, remote=remote,
                                max_frames=getattr(args, "frames", None),
                                config_loader=_config_reloader(args, list(args.overrides)))


def _remote_photo(path: str, max_bytes: int) -> tuple[bytes, str]:
    """(the bytes, the content type) of ``--source PHOTO`` for the server, checked here
    first: a file, at most ``advanced.serve.max_photo_bytes``, a JPEG or PNG (else
    :class:`UsageError`; the server reads the face)."""
    import stat
    from pathlib import Path

    from livecam.core.errors import UsageError
    from livecam.remote.photos import photo_type

    try:
        st = Path(path).stat()
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"--source {path}: not a photo file")
        if st.st_size > max_bytes:
            raise UsageError(f"--source {path} is {st.st_size / 1e6:.1f} MB, over "
                             f"advanced.serve.max_photo_bytes ({max_bytes / 1e6:.1f} MB): send a "
                             "smaller JPEG or PNG")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise UsageError(f"--source {path} cannot be read ({exc.strerror}): check the path"
                         ) from None
    kind = photo_type(data)
    if kind is None or len(data) > max_bytes:
        raise UsageError(f"--source {path} is not a JPEG or PNG photo: the server takes those")
    return data, kind


def _remote_swap(args: argparse.Namespace, n_streams: int,
                 photo: tuple[bytes, str] | None) -> RemoteSwap:
    """The swap server of ``--remote URL`` (``photo``: uploaded to each session)."""
    import os
    from pathlib import Path

    from livecam.app import RemoteSwap
    from livecam.core.errors import UsageError

    url = str(args.remote)
    if n_streams != 1:
        raise UsageError("--remote takes one --input/--output pair")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--remote {url!r}: give the server's WHIP URL, "
                         "http(s)://HOST:PORT/whip")
    token_file = getattr(args, "remote_token_file", None)
    token = (Path(token_file).read_text().strip() if token_file
             else os.environ.get("LIVECAM_REMOTE_TOKEN", ""))
    if not token:
        raise UsageError("--remote needs the WHIP token: --remote-token-file FILE or "
                         "LIVECAM_REMOTE_TOKEN (`livecam serve token add NAME` on the server)")
    return RemoteSwap(url, token, identity=args.identity, photo=photo,
                      photo_alias=ONE_OFF_NAME)


def _config_reloader(args: argparse.Namespace, overrides: list[str]) -> Callable[[], Config]:
    """Re-reads the config as the start read it (``--config``, ``--set``). Its errors name
    the file: a bad value's names only its key, and whoever asked for the reload (`livecam ctl
    reload`) must know which file to mend."""
    from livecam.config import load_config
    from livecam.core.errors import ConfigError

    path, defaults = args.config, getattr(args, "config_defaults", ())

    def load() -> Config:
        try:
            return load_config(path, overrides, defaults)
        except ConfigError as exc:
            if path is None or str(path) in str(exc):
                raise
            raise ConfigError(f"config file {path}: {exc}") from None

    return load


def _offline_for_files(args: argparse.Namespace, config: Config,
                       pairs: list[tuple[str, str]]) -> Config:
    """``config``, offline by default when every stream goes from a video file to a video
    file (no camera, virtual camera, window or pipe in it: nobody watches it live, and in live
    mode a slow machine drops frames, 64 % on 2 cores): ``advanced.pipeline.realtime=false`` (every
    frame) and ``advanced.capture.loop=false`` (the input once), said in one INFO line. The config
    file or a ``--set`` naming ``advanced.pipeline.realtime`` wins over this default."""
    import os

    def is_file(spec: str, kind: str) -> bool:
        head, _, target = spec.partition(":")
        return head == "file" and (kind == "output" or os.path.isfile(target))

    if getattr(args, "remote", None) or not pairs or not all(
            is_file(i, "input") and is_file(o, "output") for i, o in pairs):
        return config
    args.config_defaults = [*getattr(args, "config_defaults", ()),
                            "advanced.pipeline.realtime=false",
                            "advanced.capture.loop=false"]
    offline = config_from_args(args)
    if offline.pipeline.realtime:  # the user asked for a live run
        return config
    log.info("file to file: offline mode, every frame of the input once, as fast as this "
             "machine swaps (--set advanced.pipeline.realtime=true for a live run)")
    return offline


def run(args: argparse.Namespace) -> int:
    from livecam.core.errors import UsageError

    if args.frames is not None and args.frames < 1:
        raise UsageError("--frames must be at least 1")
    from livecam.daemon.lock import lock_for_run, output_files
    from livecam.subcommands.stop_signals import StopSignal, stop_on_signals

    config = config_from_args(args)
    pairs = stream_pairs(args, config)
    output_files(pairs)  # an input given as the output is refused before anything is said
    config = _offline_for_files(args, config, pairs)
    # the same device locks as the daemon: a run and a daemon on one camera, virtual camera
    # or output file clobber each other just as two daemons would
    with stop_on_signals(), lock_for_run(config, pairs):
        streams = build_from_args(args, config, daemon=False, pairs=pairs)
        try:
            streams.run()
        except StopSignal as exc:
            log.info("interrupted (%s)", exc)
        except KeyboardInterrupt:
            log.info("interrupted")
    if len(streams.apps) > 1:
        for k, summary in enumerate(streams.summaries()):
            log.info("stream %d: %s", k, summary.line())
    log.info("done: %s", streams.summary().line())
    return 0

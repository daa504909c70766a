"""``livecam analyze``: run face analysis on an input and write what it sees as JSON.

JSON layout: ``{"input": ..., "width": W, "height": H, "fps": F, "config": {analysis...},
"frames": [{"index": i, "faces": [{"track_id", "box_xyxy", "score", "keypoints_xy",
"landmarks_xy", "landmarks_z"}]}], "complete": bool}`` (pixels; landmarks rounded to 0.01 px;
``complete`` is false when Ctrl-C stopped it: the frames analysed until then are kept).
With ``--output file:debug.mp4`` the frames are also drawn (boxes, ids, landmarks).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from livecam.capture import INPUT_HELP
from livecam.subcommands.common import command_parser, config_from_args

if TYPE_CHECKING:
    from livecam.daemon.lock import DeviceLock

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, run,
        "analyze", help="show what livecam sees: faces, track ids, landmarks (JSON)",
        description="Run detection, tracking, landmarks, smoothing and selection (the "
        "`analysis` config section) on an input and write every selected face per frame.")
    p.add_argument("--input", required=True, metavar="SPEC", help=INPUT_HELP)
    p.add_argument("--json", required=True, metavar="OUT.json", type=Path,
                   help="where to write the per-frame results")
    p.add_argument("--frames", type=int, default=None, metavar="N",
                   help="stop after N frames (default: the whole file; 1 for image:/camera:/"
                   "synthetic inputs)")
    p.add_argument("--output", default=None, metavar="SPEC",
                   help="also write annotated frames, e.g. file:debug.mp4")


def _face_json(faces: Any, i: int) -> dict[str, Any]:
    return {
        "track_id": int(faces.track_ids[i]),
        "box_xyxy": [round(float(v), 2) for v in faces.boxes_xyxy[i]],
        "score": round(float(faces.scores[i]), 4),
        "keypoints_xy": faces.keypoints_xy[i].round(2).tolist(),
        "landmarks_xy": faces.landmarks_xy[i].round(2).tolist(),
        "landmarks_z": faces.landmarks_z[i].round(2).tolist(),
    }


def _draw(image_bgr: Any, faces: Any) -> Any:
    import cv2

    out = image_bgr.copy()
    for i in range(len(faces)):
        x1, y1, x2, y2 = (round(float(v)) for v in faces.boxes_xyxy[i])
        cv2.rectangle(out, (x1, y1), (x2, y2), (0, 255, 0), 2)
        cv2.putText(out, f"id {int(faces.track_ids[i])}", (x1, max(12, y1 - 6)),
                    cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 255, 0), 2)
        for x, y in faces.landmarks_xy[i]:
            cv2.circle(out, (round(float(x)), round(float(y))), 1, (0, 200, 255), -1)
    return out


PROGRESS_EVERY_S = 2.0


def run(args: argparse.Namespace) -> int:
    from livecam.capture import parse_input
    from livecam.core.errors import UsageError
    from livecam.core.files import remove_temp_files
    from livecam.daemon.lock import device_keys, lock_for_run, output_files

    config = config_from_args(args)
    spec = parse_input(args.input)
    if args.frames is not None and args.frames < 1:
        raise UsageError("--frames must be at least 1")
    if args.json.is_dir():
        raise UsageError(f"--json {args.json} is a folder: give a file name, such as "
                         f"{args.json / 'analysis.json'}")
    if spec.kind in ("file", "image"):
        target = Path(spec.target)
        if target.is_dir():
            what = "a video file" if spec.kind == "file" else "an image file"
            raise UsageError(f"--input {args.input} is a folder: give {what}")
        if not target.is_file():
            raise UsageError(f"--input {args.input}: no such file")
    # the input given as --json or --output would be overwritten: refused, as run does
    output_files([(args.input, f"file:{args.json}"), (args.input, args.output or "null")])
    # the locks `run` takes for its outputs, from start to end, on the JSON and on --output: a
    # second analyze of the file is refused (its JSON would replace this one's), a temp file
    # beside it that no live analyze can be writing is a killed one's, and a recording that a
    # run or daemon is writing is not replaced by the drawn video
    outputs = [("", f"file:{args.json}"), ("", args.output or "null")]
    if args.output and device_keys(*outputs[1])[:1] == device_keys(*outputs[0]):
        raise UsageError(f"--output {args.output} is the --json file: give the drawn video "
                         "another name")
    with _holding(lock_for_run(config, outputs), args.json):
        remove_temp_files(args.json.parent, args.json.name)
        _check_writable(args.json)  # before the work, not after it
        return _analyse_to_json(args, config, spec)


@contextlib.contextmanager
def _holding(lock: DeviceLock, json_path: Path) -> Iterator[None]:
    """Hold ``lock`` (the JSON file ``json_path`` and the --output); refused for the JSON, say
    what to do with analyze's options (the lock's own words are run's: --input, --output,
    output.device)."""
    from livecam.daemon.lock import DeviceBusyError

    try:
        lock.acquire()
    except DeviceBusyError as exc:
        from livecam.daemon.lock import device_keys

        if exc.device not in [label for _, label in device_keys("", f"file:{json_path}")]:
            raise  # --output's: the lock's own words name --output
        raise DeviceBusyError(
            f"another livecam (pid {exc.holder_pid}) is writing {json_path}: wait for it to "
            f"finish, or choose another --json path (its lock: {exc.lock_path})",
            device=exc.device, holder_pid=exc.holder_pid, lock_path=exc.lock_path) from None
    try:
        yield
    finally:
        lock.release()


def _analyse_to_json(args: argparse.Namespace, config: Any, spec: Any) -> int:
    from livecam.analysis import build_stages
    from livecam.capture import make_source
    from livecam.core.errors import OutputError
    from livecam.core.files import atomic_write

    limit = args.frames if args.frames is not None else (None if spec.kind == "file" else 1)
    source = make_source(spec, config.capture)
    sink = None
    if args.output:
        from livecam.output import make_sink, parse_output

        sink = make_sink(parse_output(args.output), config.output)
    stages = build_stages(config.analysis, fps=config.capture.fps)
    frames_out: list[dict[str, Any]] = []
    complete = True
    source.open()
    try:
        width, height = source.size_px
        fps = source.fps
        for stage in stages:
            stage.open()
        if sink is not None:
            sink.open(width=width, height=height, fps=fps)
        try:
            _analyse(source, stages, sink, limit, frames_out)
        except KeyboardInterrupt:  # keep what was analysed: written below, marked incomplete
            complete = False
    finally:
        for stage in stages:
            stage.close()
        if sink is not None:
            sink.close()
        source.close()
    doc = {"input": args.input, "width": width, "height": height, "fps": fps,
           "config": {"analysis": dataclasses.asdict(config.analysis)}, "complete": complete,
           "frames": frames_out}
    try:
        atomic_write(args.json, json.dumps(doc).encode("utf-8"))
    except OSError as exc:  # a full disk, a folder that cannot be written
        raise OutputError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    n_faces = sum(len(f["faces"]) for f in frames_out)
    stopped = "" if complete else " (interrupted: the frames analysed until Ctrl-C)"
    print(f"livecam analyze: {len(frames_out)} frames, {n_faces} faces -> {args.json}{stopped}")
    return 0 if complete else 130


def _check_writable(path: Path) -> None:
    """Raise OutputError unless a file can be made beside ``path`` (its folder made first)."""
    from livecam.core.errors import OutputError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _analyse(source: Any, stages: list[Any], sink: Any, limit: int | None,
             frames_out: list[dict[str, Any]]) -> None:
    """Read, analyse and (with ``sink``) draw frames into ``frames_out`` until the input ends
    or ``limit`` frames; a progress line on stderr every PROGRESS_EVERY_S."""
    from livecam.core.types import Frame, Packet

    t_start = t_said = time.monotonic()
    index = 0
    while limit is None or index < limit:
        image = source.read()
        if image is None:
            break
        packet = Packet.from_frame(Frame(index, 0, image))
        for stage in stages:
            packet = stage.process(packet)
        faces = packet.faces
        frames_out.append({"index": index,
                           "faces": [_face_json(faces, i) for i in range(len(faces))]})
        if sink is not None:
            sink.send(_draw(packet.image_bgr, faces))
        index += 1
        now = time.monotonic()
        if now - t_said >= PROGRESS_EVERY_S:
            t_said = now
            of = f" of {limit}" if limit is not None else ""
            print(f"livecam analyze: {index}{of} frames analysed "
                  f"({index / (now - t_start):.1f} frames/s; Ctrl-C stops and keeps them)",
                  file=sys.stderr, flush=True)

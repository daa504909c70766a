"""``livecam demo``: the whole pipeline, offline, on a clip built from photos that ship installed.

Two real people from insightface's ``t1.jpg`` move, grow, shrink and tilt their heads (a photo
cannot turn or talk, so this is the motion a photo allows); the astronaut
from scikit-image is swapped onto both. The clip is written as an H.264 file, then run through
the real runtime (``livecam.app``: file capture thread → analysis + swap stages → file output),
exactly as ``livecam run --input file:... --output file:...`` would. Writes to ``--out``:
``input.mp4``, ``demo.mp4``, ``before_after.png`` and ``demo.json`` (fps, latency, stage times).
A folder holding one of those names that the demo did not write there (no ``.livecam-demo``
record) is refused, so the user's own files are never replaced.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from livecam.subcommands.common import command_parser, config_from_args

log = logging.getLogger("livecam")

SOURCE_NAME = "astronaut"
#: What the demo writes in ``--out``, and the record that says it wrote them there.
RESULTS = ("input.mp4", "demo.mp4", "before_after.png", "demo.json")
RECORD = ".livecam-demo"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, run,
        "demo",
        help="swap faces in a demo clip built from bundled photos (offline, < 1 minute)",
        description="Build a short clip of two real people (from photos in installed packages), "
        "swap a third real person onto both with the full pipeline, and write demo.mp4, a "
        "before/after PNG and demo.json (fps, latency). Needs no camera and no download.",
    )
    p.add_argument("--out", type=Path, default=Path("livecam-demo"), metavar="DIR",
                   help="folder for the results (created; default: ./livecam-demo); one "
                   "holding files of those names that the demo did not write is refused")
    p.add_argument("--frames", type=int, default=90, metavar="N",
                   help="clip length in frames at 30 fps (default: 90)")
    p.add_argument("--size", default="1280x720", metavar="WxH",
                   help="clip size (default: 1280x720)")


def _claim(out: Path) -> None:
    """Refuse an ``--out`` folder holding a file named as one of the demo's results that the
    demo did not write there (no :data:`RECORD`; or a link, never written through), then
    record the folder as the demo's: `livecam demo --out ~/Videos` must not replace the
    user's input.mp4, and the demo's own folder is written again on the next run."""
    import os

    from livecam.core.errors import UsageError

    ours = os.path.isfile(out / RECORD) and not os.path.islink(out / RECORD)
    for name in RESULTS:
        path = out / name
        if os.path.islink(path) or (os.path.lexists(path) and not ours):
            raise UsageError(f"--out {out} holds {name}, which livecam demo did not write "
                             f"there (it writes {', '.join(RESULTS)}): move it away or give "
                             "another --out folder")
    if not ours:
        (out / RECORD).write_bytes(b"")


def _parse_size(text: str) -> tuple[int, int]:
    from livecam.core.errors import UsageError

    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {text!r}: expected WxH, e.g. 1280x720") from None
    if not (64 <= w <= 4096 and 64 <= h <= 4096) or w % 2 or h % 2:
        raise UsageError(f"--size {text!r}: width and height must be even, 64 to 4096")
    return w, h


def build_clip(n_frames: int, size: tuple[int, int]) -> list[np.ndarray]:
    """Frames (H, W, 3) uint8 BGR: two t1.jpg people moving and scaling, each slowly rotating."""
    import insightface.data

    from livecam.subcommands.demo_sprites import face_sprites

    w, h = size
    sprites = face_sprites(insightface.data.get_image("t1"))
    # two of the six that face the camera (sprites are largest first)
    chosen = [sprites[0], sprites[2]] if len(sprites) > 2 else sprites[:2]
    s = np.linspace(0.0, 1.0, n_frames)
    fw = 0.16 * w
    paths = [  # centre x, centre y, face width, roll (degrees), per frame
        (0.28 * w + 0.14 * w * s, 0.45 * h + 0.10 * h * s, fw * (1 + 0.5 * s),
         12 * np.sin(2 * np.pi * s)),
        (0.74 * w - 0.12 * w * s, 0.55 * h - 0.10 * h * s, fw * (1.3 - 0.4 * s),
         -10 * np.sin(2 * np.pi * s)),
    ]
    return compose_clip(chosen, paths[: len(chosen)], size)


def compose_clip(sprites: list[Any], paths: list[tuple[Any, ...]],
                 size: tuple[int, int], noise_sigma: float = 2.0) -> list[np.ndarray]:
    """Draw face sprites (:class:`~livecam.subcommands.demo_sprites.FaceSprite`) along ``paths``.

    Each path is (centre_x, centre_y, face_width_px, roll_deg), arrays of one value per frame.
    Composites only each face's own region (the tests' generic clip maker
    warps whole frames, ~10x slower, too slow for a one-minute demo). Returns (H, W, 3) uint8.
    """
    import cv2

    from livecam.subcommands.demo_sprites import background

    w, h = size
    n_frames = len(paths[0][0])
    base = background(size).astype(np.int16)
    rng = np.random.default_rng(1)
    # a few backdrops with different sensor noise, cycled (fresh noise per frame costs more)
    backdrops = [np.clip(base + rng.normal(0, noise_sigma, (h, w, 3)), 0, 255).astype(np.uint8)
                 for _ in range(4)]
    frames = []
    for t in range(n_frames):
        canvas = backdrops[t % len(backdrops)].copy()
        for sprite, (cx, cy, width, roll) in zip(sprites, paths, strict=True):
            fb = sprite.face_box_xyxy
            scale = float(width[t]) / float(fb[2] - fb[0])
            centre = ((fb[0] + fb[2]) / 2, (fb[1] + fb[3]) / 2)
            pivot = (float(centre[0]), float(centre[1]))
            m = np.asarray(cv2.getRotationMatrix2D(pivot, float(roll[t]), scale), np.float64)
            m[:, 2] += np.array([cx[t], cy[t]]) - np.array(centre)  # m keeps centre fixed
            sh, sw = sprite.image_bgr.shape[:2]
            corners = np.array([[0, 0, 1], [sw, 0, 1], [0, sh, 1], [sw, sh, 1]], np.float64)
            pts = corners @ m.T
            x1, y1 = (max(0, int(v)) for v in pts.min(axis=0))
            x2, y2 = int(min(w, pts[:, 0].max() + 1)), int(min(h, pts[:, 1].max() + 1))
            if x2 <= x1 or y2 <= y1:
                continue
            m_roi = m.copy()
            m_roi[:, 2] -= np.array([x1, y1], np.float64)
            img = cv2.warpAffine(sprite.image_bgr, m_roi, (x2 - x1, y2 - y1),
                                 flags=cv2.INTER_LINEAR).astype(np.float32)
            alpha = cv2.warpAffine(sprite.alpha, m_roi, (x2 - x1, y2 - y1),
                                   flags=cv2.INTER_LINEAR)[:, :, None]
            roi = canvas[y1:y2, x1:x2].astype(np.float32)
            canvas[y1:y2, x1:x2] = np.clip(roi + alpha * (img - roi) + 0.5, 0, 255)
        frames.append(canvas)
    return frames


def write_video(path: Path, frames: list[np.ndarray], fps: float = 30.0) -> None:
    """H.264 (PyAV) file of BGR frames."""
    from livecam.config.schema import OutputConfig
    from livecam.output.sinks import FileSink

    sink = FileSink(path=path, codec="libx264", crf=OutputConfig().file_crf)
    sink.open(width=frames[0].shape[1], height=frames[0].shape[0], fps=fps)
    try:
        for frame in frames:
            sink.send(frame)
    finally:
        sink.close()


def source_identity() -> Any:
    """The astronaut as an in-memory identity (prepared like a library photo)."""
    import cv2
    from skimage import data

    from livecam.config.identity import IdentityConfig
    from livecam.identity import Identity, IdentityPhoto
    from livecam.identity.photo import prepare_photo

    image = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    _, png = cv2.imencode(".png", image)
    prep = prepare_photo(image, png.tobytes(), IdentityConfig(), label="astronaut")
    photo = IdentityPhoto(sha256=prep.sha256, texture_bgr=prep.texture_bgr,
                          landmarks_xy=prep.landmarks_xy, landmarks_z=prep.landmarks_z,
                          warnings=prep.warnings)
    return Identity(name=SOURCE_NAME, photos=(photo,))


def source_photo_notice(identity: Any) -> str | None:
    """Why the demo's source photo would not pass `livecam identity add` without --force, or
    None when it would (its warnings come from the same checks)."""
    warnings = [w for photo in identity.photos for w in photo.warnings]
    if not warnings:
        return None
    return ("note: the demo's source photo (scikit-image's astronaut) would need "
            f"`livecam identity add --force`: {'; '.join(warnings)}. No larger face photo ships "
            "with the installed packages, so the demo uses it anyway and its swapped faces look "
            "softer than a good photo of your own would")


def _check_photo_packages() -> None:
    """The demo's photos ship inside scikit-image and insightface (dev/test dependencies)."""
    import importlib.util

    from livecam.core.errors import DependencyError

    missing = [name for name, module in (("scikit-image", "skimage"),
                                         ("insightface", "insightface"))
               if importlib.util.find_spec(module) is None]
    if missing:
        raise DependencyError(f"livecam demo builds its clip from photos that ship with "
                              f"{' and '.join(missing)}: pip install 'livecam[demo]' "
                              "(or, from a checkout, pip install -e '.[demo]')")


def run(args: argparse.Namespace) -> int:
    import cv2

    from livecam.app import build_app
    from livecam.config import load_config
    from livecam.core.errors import UsageError
    from livecam.core.files import atomic_write
    from livecam.core.types import RuntimeState
    from livecam.identity import IdentityCollection

    _check_photo_packages()
    if args.frames < 2 or args.frames > 3000:
        raise UsageError("--frames must be 2 to 3000")
    size = _parse_size(args.size)
    # offline file-to-file: every frame, in order, as fast as possible
    overrides = ["advanced.pipeline.realtime=false", "advanced.capture.loop=false",
                 "advanced.pipeline.status_interval_s=0", *args.overrides]
    config_from_args(args)  # logging set-up and validation of --config/--set
    config = load_config(args.config, overrides)
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create it ({exc.strerror})") from None
    _claim(out)
    t0 = time.perf_counter()
    frames = build_clip(args.frames, size)
    input_path = out / "input.mp4"
    write_video(input_path, frames)
    astronaut = source_identity()
    notice = source_photo_notice(astronaut)
    if notice is not None:
        print(notice)
    identities = IdentityCollection({SOURCE_NAME: astronaut})
    t_prepared = time.perf_counter()
    log.info("clip of %d frames built and source prepared in %.1f s", len(frames),
             t_prepared - t0)

    pick = len(frames) // 2
    grabbed: dict[str, np.ndarray] = {}
    faces_swapped: list[int] = []

    def on_sent(packet: Any, image: np.ndarray) -> None:
        if packet is None:
            return
        faces_swapped.append(len(packet.faces))
        if packet.frame.index == pick:
            grabbed["before"] = packet.frame.image_bgr
            grabbed["after"] = image

    # built as `livecam run --input FILE --output FILE` builds it (the composition root picks
    # the stages: the CPU chain, or the GPU pipeline for a neural swap on a CUDA GPU)
    app = build_app(config, input_spec=f"file:{input_path}",
                    output_spec=f"file:{out / 'demo.mp4'}", identities=identities,
                    state=RuntimeState(active_identity=SOURCE_NAME, identities=(SOURCE_NAME,)),
                    on_sent=on_sent)
    t_run = time.perf_counter()
    app.run()
    run_s = time.perf_counter() - t_run
    sent = app.metrics.counter("sent")
    snap = app.metrics.snapshot()
    latencies = sorted(app.metrics.latencies_ms())
    stage_ms = {k: float(np.median(v)) for k, v in app.metrics.stage_times_ms().items() if v}
    if "before" in grabbed:
        side = np.hstack([grabbed["before"], grabbed["after"]])
        # encoded here and written whole: imwrite's failure on a full disk was a libpng line
        # and a False nobody read
        atomic_write(out / "before_after.png", cv2.imencode(".png", side)[1].tobytes())
    report = {
        "frames": len(frames),
        "size": list(size),
        "frames_sent": sent,
        "faces_per_frame_mean": float(np.mean(faces_swapped)) if faces_swapped else 0.0,
        "pipeline_fps": sent / run_s if run_s > 0 else 0.0,
        "pipeline_wall_s": run_s,
        "prepare_wall_s": t_prepared - t0,
        "total_wall_s": time.perf_counter() - t0,
        "latency_p50_ms": snap.latency_p50_ms,
        "latency_p99_ms": snap.latency_p99_ms,
        "latency_max_ms": latencies[-1] if latencies else 0.0,
        "stage_p50_ms": stage_ms,
        "source_photo_warnings": [w for p in astronaut.photos for w in p.warnings],
        "note": "offline run (advanced.pipeline.realtime=false): every frame processed in order; "
                "fps is throughput of decode + analysis + swap + encode on this machine",
    }
    atomic_write(out / "demo.json", json.dumps(report, indent=2).encode())
    print(f"demo: {sent} frames at {report['pipeline_fps']:.1f} fps (latency p50 "
          f"{snap.latency_p50_ms:.1f} ms, p99 {snap.latency_p99_ms:.1f} ms), "
          f"{report['faces_per_frame_mean']:.1f} faces per frame, "
          f"{report['total_wall_s']:.1f} s in all")
    print(f"wrote {out / 'demo.mp4'}, {out / 'before_after.png'}, {out / 'demo.json'}")
    return 0

"""Calibrate the leak judge: its residual (and dlib's identity distance) on faces that are real,
lightly blurred, covered and swapped; print a table and write JSON.

    python -m scripts.leak_calibrate [--json leak_calibrate.json] [--samples 4]
        [--set advanced.swap.keep_eyes=never ...] [--conditions real,swapped]

Faces: every face of the ``still_2``, ``still_6`` and ``turn`` leak clips (tests.helpers.
leak_clips) on a few frames each. Each is altered as named, H.264-encoded at the leak
measure's output quality (CRF 14) and decoded, then compared with the unaltered input:

- ``real``: unaltered; ``real_crf28``: unaltered at a low streaming quality (CRF 28);
- ``blur_2pct`` ... ``blur_8pct``: a Gaussian blur of sigma 2, 3, 4, 6 or 8 % of the face
  width over the face (a light blur still shows the person: a viewer knows them, and so does
  dlib);
- ``cover_*``: ``livecam.swap.cover.FaceCover`` (``swap.cover`` style,
  ``advanced.swap.cover_cells``) on the face as livecam follows it (mesh hull);
- ``swapped``: livecam's classic swap of skimage's astronaut onto the face (analysis + swap
  stages as ``livecam run`` builds them, offline), with the config's ``--set`` overrides (to
  see which swap setting moves the residual).

dlib distance: ``livecam.identity.face_judge`` (ResNet 128-d) between the altered and the
unaltered face; same person ~0.2-0.5, different people 0.6-0.95, threshold 0.6. The judge's
threshold (``LEAK_RESIDUAL``) must put every ``real*`` and ``blur_2pct`` face below it (a
leak) and every cover and swap above it, with room on both sides.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

import numpy as np


def reencode(image: np.ndarray, crf: int) -> np.ndarray:
    import av

    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt = image.shape[1], image.shape[0], "yuv420p"
    enc.time_base = Fraction(1, 30)
    enc.options = {"crf": str(crf), "preset": "veryfast"}
    packets = enc.encode(av.VideoFrame.from_ndarray(image, format="bgr24")) + enc.encode(None)
    dec = av.CodecContext.create("h264", "r")
    frames = []
    for p in packets:
        frames += dec.decode(p)
    frames += dec.decode(None)
    return np.asarray(frames[0].to_ndarray(format="bgr24"))


def blurred(image: np.ndarray, box: np.ndarray, pct: float) -> np.ndarray:
    import cv2

    sigma = pct / 100.0 * float(box[2] - box[0])
    out = image.copy()
    pad = int(0.3 * (box[2] - box[0]))
    x1, y1 = max(0, int(box[0]) - pad), max(0, int(box[1]) - pad)
    x2, y2 = min(image.shape[1], int(box[2]) + pad), min(image.shape[0], int(box[3]) + pad)
    out[y1:y2, x1:x2] = cv2.GaussianBlur(image[y1:y2, x1:x2], (0, 0), sigma)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="leak_calibrate.json")
    parser.add_argument("--samples", type=int, default=4, help="frames per clip")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for the analysis and swap, as livecam run's")
    parser.add_argument("--conditions", default="",
                        help="comma-separated condition names to measure (default: all)")
    args = parser.parse_args()
    wanted = set(filter(None, args.conditions.split(",")))

    import tempfile
    from pathlib import Path

    import cv2
    from skimage import data

    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet, RuntimeState, Unswappable, WithheldFaces
    from livecam.identity import IdentityCollection, identity_from_photo
    from livecam.identity.face_judge import FaceJudge, distance
    from livecam.swap.cover import FaceCover
    from livecam.swap.stage import ClassicSwapStage
    from livecam.track.bytetrack import iou_matrix
    from tests.helpers.leak_clips import leak_clips
    from tests.helpers.leak_judge import LEAK_RESIDUAL, residual

    config = load_config(None, ["advanced.pipeline.realtime=false", *args.set])
    with tempfile.TemporaryDirectory() as scratch:
        photo = Path(scratch) / "astronaut.png"
        cv2.imwrite(str(photo), np.ascontiguousarray(data.astronaut()[:, :, ::-1]))
        identity = identity_from_photo(photo, config.identity, name="astro")
    swap = ClassicSwapStage(config.swap, IdentityCollection({"astro": identity}))
    judge = FaceJudge()
    state = RuntimeState(active_identity="astro", identities=("astro",))
    covers = {f"cover_blur_{c}cells": FaceCover(mode="cover", style="blur", cells=c)
              for c in (12, 8, 6)}
    covers["cover_pixelate_8cells"] = FaceCover(mode="cover", style="pixelate", cells=8)
    rows: dict[str, list[tuple[float | None, float | None, str]]] = {}
    where = ""  # clip/frame/face of the face being recorded, kept with its figures

    def record(name: str, original: np.ndarray, altered: np.ndarray, box: np.ndarray) -> None:
        if wanted and name not in wanted:
            return
        out = reencode(altered, 28 if name == "real_crf28" else 14)
        r = residual(original, out, box)
        dlib_box = box.copy()
        dlib_box[1] += 0.2 * (box[3] - box[1])  # dlib's boxes start at the brows
        d = distance(judge.embed(original, dlib_box), judge.embed(out, dlib_box))
        rows.setdefault(name, []).append((r, d, where))

    swap.open()
    for name, clip in leak_clips().items():
        if name not in ("still_2", "still_6", "turn"):
            continue
        frames = list(clip.frames())[:40]  # the turn reaches 70 degrees at frame 25
        picks = np.linspace(0, len(frames) - 1, args.samples).astype(int)
        analysis = build_stages(config.analysis, fps=config.capture.fps)[0]
        with analysis:
            for t, (frame, truth) in enumerate(frames):
                frame = reencode(frame, 12)  # as livecam decodes the input file
                packet = analysis.process(Packet.from_frame(Frame(t, 0, frame), state))
                swapped = swap.process(packet)
                if t not in picks:
                    continue
                faces = packet.faces
                for j, box in enumerate(truth.boxes_xyxy):
                    where = f"{name}/{t}/{j}"
                    record("real", frame, frame, box)
                    record("real_crf28", frame, frame, box)
                    for pct in (2, 3, 4, 6, 8):
                        record(f"blur_{pct}pct", frame, blurred(frame, box, pct), box)
                    match = iou_matrix(box[None], faces.boxes_xyxy)
                    if match.size and match.max() > 0.3:
                        i = int(match.argmax())
                        held = WithheldFaces.from_faces(faces[[i]], Unswappable.PENDING)
                        for label, cover in covers.items():
                            record(label, frame, cover.cover(frame, held, t), box)
                        record("swapped", frame, swapped.image_bgr, box)
    swap.close()

    report = {}
    print(f"\nleak judge calibration (threshold {LEAK_RESIDUAL}: residual below it = leak)")
    print(f"{'condition':>22} {'faces':>5} {'resid min':>9} {'p5':>6} {'median':>7} "
          f"{'p95':>6} {'max':>6} {'leak %':>7} {'dlib med':>8} {'dlib min':>8}")
    for name, vals in rows.items():
        judged = [v for v in vals if v[0] is not None]
        r = np.array([v[0] for v in judged])
        d = np.array([v[1] for v in vals if v[1] is not None])
        row = {"faces": len(vals), "residual_min": float(r.min()),
               "residual_max": float(r.max()), "residual_p5": float(np.percentile(r, 5)),
               "residual_median": float(np.median(r)), "residual_p95": float(np.percentile(r, 95)),
               "leak_share": float((r < LEAK_RESIDUAL).mean()),
               "dlib_median": float(np.median(d)), "dlib_min": float(d.min()),
               "residuals": [round(float(x), 4) for x in r],
               "faces_at": [v[2] for v in judged],  # clip/frame/face of each residual
               "dlib": [round(float(x), 4) for x in d]}
        report[name] = row
        print(f"{name:>22} {row['faces']:>5} {row['residual_min']:>9.3f} "
              f"{row['residual_p5']:>6.3f} {row['residual_median']:>7.3f} "
              f"{row['residual_p95']:>6.3f} {row['residual_max']:>6.3f} "
              f"{100 * row['leak_share']:>6.1f}% {row['dlib_median']:>8.3f} "
              f"{row['dlib_min']:>8.3f}")
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump({"threshold": LEAK_RESIDUAL, "settings": args.set, "conditions": report},
                  fh, indent=2)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

"""Judge identity transfer of the classic swap with an independent recognizer (dlib ResNet).

Every ordered pair of 8 real faces that ship offline (astronaut, six people in insightface's
t1.jpg, Tom Hanks) is swapped, for the defaults and a few variants (``MODES``); the swapped
face should be closer to the source than to the target person. The judge compares with one
photo of the source, so it also rewards copying that photo's gaze: the last line measures how
far a photo moves from itself when only its irises move. Prints a table, writes JSON and (with
--grid) the look grid PNG (defaults).

    python -m scripts.judge_swap --json judge.json --grid docs/classic-swap-grid.png
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict, replace
from pathlib import Path

import cv2
import numpy as np

from livecam.config.swap import SwapConfig
from livecam.identity.face_judge import FaceJudge
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import build_topology
from tests.helpers.swap_eval import judge_pairs, real_faces, source_from, summarise, swap_pair


def face_tile(image: np.ndarray, xy: np.ndarray, size: int) -> np.ndarray:
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    c = (lo + hi) / 2
    half = max(hi - lo) * 0.75
    m = np.array([[size / (2 * half), 0, size / 2 - c[0] * size / (2 * half)],
                  [0, size / (2 * half), size / 2 - c[1] * size / (2 * half)]], np.float32)
    return cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_AREA,
                          borderMode=cv2.BORDER_REPLICATE)


def grid(config: SwapConfig, faces: list, topology, size: int = 112) -> np.ndarray:
    """Rows = targets, columns = sources; first column/row = the originals."""
    swapper = ClassicFaceSwapper(config, topology)
    sources = [source_from(f, topology, mirror_fill=config.mirror_fill,
                           skin_only=config.source_skin_only) for f in faces]
    n = len(faces)
    canvas = np.full(((n + 1) * size, (n + 1) * size, 3), 255, np.uint8)
    for i, f in enumerate(faces):
        canvas[0:size, (i + 1) * size:(i + 2) * size] = face_tile(f.image_bgr, f.landmarks_xy,
                                                                  size)
    for j, t in enumerate(faces):
        y = (j + 1) * size
        canvas[y:y + size, 0:size] = face_tile(t.image_bgr, t.landmarks_xy, size)
        for i, s in enumerate(sources):
            if i == j:
                continue
            out = swap_pair(swapper, s, t)
            canvas[y:y + size, (i + 1) * size:(i + 2) * size] = face_tile(out, t.landmarks_xy,
                                                                          size)
    return canvas


# Rows of the table: (label, SwapConfig overrides). The first two are the defaults.
MODES: tuple[tuple[str, dict[str, object]], ...] = (
    ("feather", {}),
    ("seamless", {"blend": "seamless"}),
    ("feather, source eyes", {"keep_eyes": "auto"}),
    ("feather, skin only", {"source_skin_only": True}),
)


def photo_bias(faces: list, topology, judge: FaceJudge, shift: float = 0.08) -> dict[str, float]:
    """How far the judge moves a photo from *itself* when only its gaze changes: the irises
    shifted by ``shift`` eye widths (``tests.helpers.expressions``), nothing else. A swap that
    shows the streamer's gaze pays at least this against a source photographed looking
    elsewhere."""
    from livecam.identity.face_judge import distance, dlib_box_from_mesh
    from tests.helpers.expressions import glance

    out = {}
    for f in faces:
        box = dlib_box_from_mesh(f.landmarks_xy)
        moved = glance(f.image_bgr, f.landmarks_xy, (topology.eye_right, topology.eye_left),
                       shift)
        out[f.label] = distance(judge.embed(moved, box), judge.embed(f.image_bgr, box))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--grid", type=Path, help="write a before/after grid PNG here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    faces = real_faces()
    topology = build_topology()
    judge = FaceJudge()
    report: dict = {"faces": [f.label for f in faces], "modes": {}}
    print(f"{'mode':22} {'pairs':>5} {'closer to source':>17} {'mean d(source)':>15} "
          f"{'mean d(target)':>15}")
    for mode, overrides in MODES:
        config = replace(SwapConfig(), **overrides)  # type: ignore[arg-type]
        results = judge_pairs(config, faces, topology, judge)
        summary = summarise(results)
        report["modes"][mode] = {"overrides": overrides, "summary": summary,
                                 "pairs": [asdict(r) for r in results]}
        print(f"{mode:22} {int(summary['pairs']):>5} {summary['closer_to_source']:>17.3f} "
              f"{summary['mean_d_source']:>15.3f} {summary['mean_d_target']:>15.3f}")
    bias = photo_bias(faces, topology, judge)
    report["photo_bias_gaze_0.08"] = bias
    print("the same photo with only its irises moved by 0.08 eye widths, judge distance to "
          "itself: " + ", ".join(f"{k} {v:.3f}" for k, v in bias.items())
          + f" (mean {np.mean(list(bias.values())):.3f})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.grid:
        feather = grid(SwapConfig(), faces, topology)
        cv2.imwrite(str(args.grid), feather)
        print(f"grid written to {args.grid} (rows: targets, columns: sources)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How small may a source photo's face be? The classic swap's identity and detail against the
source face's width.

Every real face that ships offline (skimage's astronaut, the six people of insightface's t1.jpg;
native faces 84-105 px wide) is scaled down so its face is S px wide, analysed and prepared
exactly as `livecam identity add` does (a photo whose face is not found at that size counts as
refused), and swapped onto every other person shown at a live face width T. Reported per (S, T):

- ``closer``: share of pairs the independent judge (dlib ResNet) finds closer to the source
  person than to the target person (the swap's identity goal);
- ``d_src``: mean judge distance swapped face -> source person (lower = more like them);
- ``detail``: Laplacian variance inside the swapped face, relative to the same swap made from
  the native-size photo (1.0 = no detail lost; the texture's resolution is what limits it).

    python -m scripts.bench_source_face_size --json source_face_size.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from livecam.analysis import geometry
from livecam.analysis.photo import analyze_photo
from livecam.config.identity import IdentityConfig
from livecam.config.swap import SwapConfig
from livecam.identity.face_judge import FaceJudge, distance, dlib_box_from_mesh
from livecam.identity.photo import prepare_face
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import build_topology
from livecam.swap.source import SourceFace
from tests.helpers.swap_eval import RealFace, real_faces

SOURCE_WIDTHS_PX = (24, 32, 40, 48, 56, 64, 80, 0)  # 0 = the photo as it is
TARGET_WIDTHS_PX = (100, 200, 300)


@dataclass
class Target:
    label: str
    image_bgr: np.ndarray
    landmarks_xy: np.ndarray
    landmarks_z: np.ndarray
    mask: np.ndarray  # (H, W) bool, inside the face (eroded convex hull of the mesh)


def crop_around(face: RealFace, margin: float = 1.2) -> RealFace:
    """The face with ``margin`` face widths of context on every side (faster to scale)."""
    lo, hi = face.landmarks_xy.min(axis=0), face.landmarks_xy.max(axis=0)
    pad = margin * float(max(hi - lo))
    h, w = face.image_bgr.shape[:2]
    x1, y1 = int(max(0, lo[0] - pad)), int(max(0, lo[1] - pad))
    x2, y2 = int(min(w, hi[0] + pad)), int(min(h, hi[1] + pad))
    offset = np.array([x1, y1], np.float32)
    return RealFace(face.label, np.ascontiguousarray(face.image_bgr[y1:y2, x1:x2]),
                    face.landmarks_xy - offset, face.landmarks_z)


def scaled_target(face: RealFace, width_px: int) -> Target:
    scale = width_px / geometry.face_width_px(face.landmarks_xy)
    image = cv2.resize(face.image_bgr, None, fx=scale, fy=scale,
                       interpolation=cv2.INTER_CUBIC if scale > 1 else cv2.INTER_AREA)
    xy = (face.landmarks_xy * scale).astype(np.float32)
    hull = cv2.convexHull(xy.astype(np.int32))
    mask = np.zeros(image.shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, hull, 1)
    mask = cv2.erode(mask, np.ones((max(3, width_px // 20),) * 2, np.uint8))
    return Target(face.label, image, xy, (face.landmarks_z * scale).astype(np.float32),
                  mask.astype(bool))


def source_at(face: RealFace, width_px: int, topology: object) -> SourceFace | None:
    """The face's photo scaled so the face is ``width_px`` wide, analysed and prepared as the
    library does; None when the face is not found there."""
    native = geometry.face_width_px(face.landmarks_xy)
    scale = 1.0 if width_px == 0 else width_px / native
    image = face.image_bgr if scale == 1.0 else np.ascontiguousarray(cv2.resize(
        face.image_bgr, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA))
    found = analyze_photo(image)
    if len(found) == 0:
        return None
    centre = (face.landmarks_xy.mean(axis=0) * scale)
    i = int(np.argmin(np.linalg.norm(found.landmarks_xy[:, :468].mean(axis=1) - centre,
                                     axis=1)))
    if np.linalg.norm(found.landmarks_xy[i, :468].mean(axis=0) - centre) > 0.5 * native * scale:
        return None  # another face was found, not this one
    prep = prepare_face(image, f"{face.label}@{width_px}".encode(),
                        found.landmarks_xy[i, :468], found.landmarks_z[i, :468],
                        IdentityConfig(min_face_px=16), label=face.label)
    return SourceFace.build(photo_sha256=prep.sha256, texture_bgr=prep.texture_bgr,
                            landmarks_xy=prep.landmarks_xy, landmarks_z=prep.landmarks_z,
                            topology=topology)  # type: ignore[arg-type]


def detail(image_bgr: np.ndarray, mask: np.ndarray) -> float:
    grey = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2GRAY)
    return float(cv2.Laplacian(grey, cv2.CV_32F)[mask].var())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    faces = [crop_around(f) for f in real_faces() if f.label != "hanks"]  # hanks: 75 px crop
    topology = build_topology()
    judge = FaceJudge()
    swapper = ClassicFaceSwapper(SwapConfig(), topology)
    refs = {f.label: judge.embed(f.image_bgr, dlib_box_from_mesh(f.landmarks_xy)) for f in faces}
    targets = {(f.label, t): scaled_target(f, t) for f in faces for t in TARGET_WIDTHS_PX}
    rows: list[dict[str, object]] = []
    print("| source face px | live face px | pairs | closer to source | d(source) | detail vs "
          "native | face not found |\n|---|---|---|---|---|---|---|")
    native_detail: dict[tuple[str, str, int], float] = {}
    for s_px in sorted(SOURCE_WIDTHS_PX, key=lambda s: -s if s else -10**6):  # native first
        sources = {f.label: source_at(f, s_px, topology) for f in faces}
        refused = sorted(k for k, v in sources.items() if v is None)
        for t_px in TARGET_WIDTHS_PX:
            closer, d_src, ratios = [], [], []
            for src_label, source in sources.items():
                if source is None:
                    continue
                for tgt_label in refs:
                    if tgt_label == src_label:
                        continue
                    target = targets[(tgt_label, t_px)]
                    out = target.image_bgr.copy()
                    swapper.swap_into(out, target.image_bgr, source, target.landmarks_xy,
                                      target.landmarks_z)
                    emb = judge.embed(out, dlib_box_from_mesh(target.landmarks_xy))
                    d_s, d_t = distance(emb, refs[src_label]), distance(emb, refs[tgt_label])
                    closer.append(d_s < d_t)
                    d_src.append(d_s)
                    key = (src_label, tgt_label, t_px)
                    value = detail(out, target.mask)
                    if s_px == 0:
                        native_detail[key] = value
                    ratios.append(value / native_detail[key])
            row = {"source_face_px": s_px or "native (84-105)", "target_face_px": t_px,
                   "pairs": len(closer), "refused": refused,
                   "closer_to_source": float(np.mean(closer)) if closer else None,
                   "mean_d_source": float(np.mean(d_src)) if d_src else None,
                   "detail_vs_native": float(np.mean(ratios)) if ratios else None}
            rows.append(row)
            print(f"| {row['source_face_px']} | {t_px} | {len(closer)} | "
                  f"{row['closer_to_source'] or 0:.3f} | {row['mean_d_source'] or 0:.3f} | "
                  f"{row['detail_vs_native'] or 0:.2f} | {', '.join(refused) or '-'} |",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

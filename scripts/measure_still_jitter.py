"""How still is a still face? Landmark jitter and swap flicker on still pictures with noise.

The product's analysis (``build_stages``, as ``livecam run`` builds it) follows still faces
with fresh sensor noise (sigma 3) on every frame:

- **astronaut** (as tests/swap/test_temporal.py): 30 frames, the first 5 skipped; per frame the
  follower's raw mesh and the smoothed landmarks the swap gets. ``raw_jitter_px`` /
  ``smooth_jitter_px``: mean per-landmark move from one frame to the next; ``first_off_px``:
  how far the first frame's mesh lies from the mean of the later raw meshes. Then the classic
  swap (source t1-3) with the live landmarks and with frame 5's landmarks frozen: ``f_in``,
  ``f_live``, ``f_frozen`` are the mean frame-to-frame change inside the face (grey levels),
  ``f_landmarks_only`` the same for the live landmarks on the noise-free picture (the flicker
  that landmark motion alone makes).
- **t1** (six people): ``slide_px``, how far each face's smoothed landmarks move from the first
  frame to the last; ``first_frame_mesh_calls`` and ``later_mesh_calls`` (per frame).

Deterministic for a given ``--seed`` on one machine (no timings are reported).

    python -m scripts.measure_still_jitter --json still_jitter.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from livecam.analysis import build_stages
from livecam.config import load_config
from livecam.config.identity import IdentityConfig
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.identity import Identity, IdentityCollection, IdentityPhoto
from livecam.identity.photo import prepare_face
from livecam.swap.mesh import build_topology
from livecam.swap.stage import ClassicSwapStage
from tests.helpers.swap_eval import real_faces

FRAMES = 30
SETTLE = 5  # frames skipped before measuring, as the test does


def _noisy(image: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.clip(image + rng.normal(0, 3.0, image.shape), 0, 255).astype(np.uint8)
            for _ in range(FRAMES)]


def _jitter_px(seq: np.ndarray) -> float:
    """Mean per-landmark move between consecutive frames of (T, K, 2)."""
    return float(np.linalg.norm(np.diff(seq, axis=0), axis=2).mean())


def _flicker(frames: list[np.ndarray], region: np.ndarray) -> float:
    return float(np.mean([np.abs(frames[t].astype(int) - frames[t - 1].astype(int))[region]
                          .mean() for t in range(1, len(frames))]))


def _follow(frames: list[np.ndarray], state: RuntimeState,
            ) -> tuple[list[Packet], list[dict[int, np.ndarray]], list[int]]:
    """Packets, the follower's raw meshes per track, and mesh ROIs run, per frame."""
    from livecam.analysis.stage import AnalysisStage

    stage = build_stages(load_config(None).analysis)[0]
    assert isinstance(stage, AnalysisStage)
    follower: Any = stage.follower
    calls = [0]
    with stage:
        run = follower.networks.landmarks

        def counting(image: np.ndarray, rois: Any) -> Any:
            calls[-1] += len(rois)
            return run(image, rois)

        follower.networks.landmarks = counting
        packets, raw = [], []
        for i, image in enumerate(frames):
            packets.append(stage.process(Packet.from_frame(Frame(i, i * 33_333_333, image),
                                                           state)))
            raw.append(dict(follower._marks))
            calls.append(0)
    return packets, raw, calls[:-1]


def astronaut(seed: int) -> dict[str, float]:
    by = {f.label: f for f in real_faces()}
    source = by["t1-3"]
    prep = prepare_face(source.image_bgr, b"t1-3", source.landmarks_xy, source.landmarks_z,
                        IdentityConfig())
    identities = IdentityCollection({"c": Identity("c", (IdentityPhoto(
        prep.sha256, prep.texture_bgr, prep.landmarks_xy, prep.landmarks_z),))})
    still = by["astronaut"].image_bgr
    packets, raw_marks, _ = _follow(_noisy(still, seed), RuntimeState(active_identity="c"))
    raw = np.stack([next(iter(m.values())) for m in raw_marks])
    smooth = np.stack([p.faces.landmarks_xy[0] for p in packets])
    mean_raw = raw[SETTLE:].mean(axis=0)
    analysed = packets[SETTLE:]
    frozen = analysed[0].faces
    config = load_config(None)
    with ClassicSwapStage(config.swap, identities) as swap:
        live = [swap.process(p).image_bgr for p in analysed]
        held = [swap.process(p.with_fields(faces=frozen)).image_bgr for p in analysed]
    with ClassicSwapStage(config.swap, identities) as swap:
        clean = [swap.process(p.with_fields(image_bgr=still)).image_bgr for p in analysed]
    region = np.zeros(still.shape[:2], np.uint8)
    cv2.fillPoly(region, [np.round(frozen.landmarks_xy[0][build_topology().face_oval])
                          .astype(np.int32)], (1,))
    face = region > 0
    return {"raw_jitter_px": _jitter_px(raw[SETTLE:]),
            "smooth_jitter_px": _jitter_px(smooth[SETTLE:]),
            "first_off_px": float(np.linalg.norm(raw[0] - mean_raw, axis=1).mean()),
            "f_in": _flicker([p.image_bgr for p in analysed], face),
            "f_live": _flicker(live, face), "f_frozen": _flicker(held, face),
            "f_landmarks_only": _flicker(clean, face)}


def group(seed: int, t1_bgr: np.ndarray) -> dict[str, Any]:
    packets, _, calls = _follow(_noisy(t1_bgr, seed), RuntimeState())
    ids = sorted(set.intersection(*[set(p.faces.track_ids.tolist()) for p in packets]))

    def marks(p: Packet, tid: int) -> np.ndarray:
        return p.faces.landmarks_xy[p.faces.track_ids.tolist().index(tid)]

    slide = [float(np.linalg.norm(marks(packets[-1], t) - marks(packets[0], t), axis=1).mean())
             for t in ids]
    return {"faces": len(ids), "slide_px": slide, "first_frame_mesh_calls": calls[0],
            "later_mesh_calls": float(np.mean(calls[1:]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from insightface.data import get_image  # the six people of t1.jpg, in the wheel

    t1_bgr = np.asarray(get_image("t1"))
    rows = []
    print("seed  raw_jit  smooth_jit  first_off   f_in  f_live  f_frozen  diff  f_lm_only"
          "  t1 slide max  mesh calls 1st/later")
    for seed in args.seeds:
        a = astronaut(seed)
        g = group(seed, t1_bgr)
        rows.append({"seed": seed, "astronaut": a, "t1": g})
        print(f"{seed:4d}  {a['raw_jitter_px']:7.4f}  {a['smooth_jitter_px']:10.4f}  "
              f"{a['first_off_px']:9.3f}  {a['f_in']:5.3f}  {a['f_live']:6.3f}  "
              f"{a['f_frozen']:8.3f}  {a['f_live'] - a['f_frozen']:+.3f}  "
              f"{a['f_landmarks_only']:9.3f}  {max(g['slide_px']):12.2f}  "
              f"{g['first_frame_mesh_calls']:4d}/{g['later_mesh_calls']:.0f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

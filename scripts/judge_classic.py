"""Judge the classic swap on the hard set (people of varied tone, age, glasses, beards; even,
dim and warm light): skin colour (CIEDE2000), foreign colours, accessories, identity (dlib).

Every person (even light) is swapped onto every other person in each light, with the swap's
defaults (or ``--set key=value`` overrides). Sources with glasses or a beard are also swapped
without them (same mesh) to see which output pixels the accessories change. Prints the goal
table, writes JSON (every pair) and, with --grid, the worst pairs as a picture.

    python -m scripts.judge_classic --json judge_classic.json --grid docs/classic-swap-grid-hard.png
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np

from livecam.config.swap import SwapConfig
from livecam.identity.face_judge import FaceJudge, distance, dlib_box_from_mesh
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import build_topology
from tests.helpers import classic_judge as cj
from tests.helpers.hard_set import LIGHTS, HardFace, bare, build_people, in_light
from tests.helpers.swap_eval import source_from, swap_pair

GOALS = {"de2000": 4.0, "foreign": 0.01, "leak": 0.0, "kept": 0.9, "closer": 0.9}


def tile(image: np.ndarray, xy: np.ndarray, size: int = 160) -> np.ndarray:
    c = (xy.min(axis=0) + xy.max(axis=0)) / 2
    half = float(np.ptp(xy, axis=0).max()) * 0.7
    s = size / (2 * half)
    m = np.array([[s, 0, size / 2 - c[0] * s], [0, s, size / 2 - c[1] * s]], np.float32)
    return np.asarray(cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_AREA,
                                     borderMode=cv2.BORDER_REPLICATE), np.uint8)


def hard_set(cache: Path | None) -> tuple[list[HardFace], list[HardFace]]:
    """The people (even light) and the targets (every person in every light); ``cache``
    (a pickle this script wrote) skips the minute of face analysis when judging again."""
    if cache is not None and cache.exists():
        with cache.open("rb") as f:
            people, targets = pickle.load(f)
        return people, targets
    people = build_people()
    targets = [in_light(p, light, seed=k) for k, p in enumerate(people) for light in LIGHTS]
    if cache is not None:
        with cache.open("wb") as f:
            pickle.dump((people, targets), f)
    return people, targets


def judge(config: SwapConfig, cache: Path | None = None,
          ) -> tuple[list[dict], dict[tuple[str, str, str], np.ndarray],
                     list[HardFace], list[HardFace]]:
    topology = build_topology()
    swapper = ClassicFaceSwapper(config, topology)
    people, targets = hard_set(cache)
    remove = config.remove_source_accessories
    close = config.keep_mouth
    sources = {p.person: source_from(p.face, topology, remove_accessories=remove,
                                     close_mouth=close) for p in people}
    bares = {p.person: source_from(bare(p).face, topology, remove_accessories=remove,
                                   close_mouth=close)
             for p in people if p.accessories.any()}
    dlib = FaceJudge()
    # the source person without the accessories the hard set drew (the person, not the glasses)
    ref = {p.person: dlib.embed(p.bare_bgr, dlib_box_from_mesh(p.face.landmarks_xy))
           for p in people}
    rows, outs = [], {}
    relit_bins = {(p.person, light): cj.skin_bins(p, light) for p in people for light in LIGHTS}
    for t in targets:
        region = cj.skin_region(t)
        own_bins = cj.skin_bins(t)
        box = dlib_box_from_mesh(t.face.landmarks_xy)
        ref_t = dlib.embed(t.face.image_bgr, box)
        for s in people:
            if s.person == t.person:
                continue
            out = swap_pair(swapper, sources[s.person], t.face)
            outs[(s.person, t.person, t.light)] = out
            emb = dlib.embed(out, box)
            row = {"source": s.person, "target": t.person, "light": t.light,
                   "de2000": cj.mean_colour_de2000(out, t, region),
                   "local_de2000": cj.local_de2000(out, t, region),
                   "foreign": cj.foreign_share(
                       out, region, cj.skin_colours(own_bins, relit_bins[(s.person, t.light)])),
                   "d_source": distance(emb, ref[s.person]), "d_target": distance(emb, ref_t),
                   "glasses_leak": None, "beard_leak": None,
                   "glasses_kept": cj.glasses_kept(out, t)}
            if s.person in bares:
                leak = cj.accessory_leak(out, swap_pair(swapper, bares[s.person], t.face), t)
                if s.glasses.any() and not t.glasses.any():
                    row["glasses_leak"] = leak
                if s.beard.any() and not t.beard.any():
                    row["beard_leak"] = leak
            rows.append(row)
    return rows, outs, people, targets


def summary(rows: list[dict]) -> dict[str, float]:
    def vals(key: str) -> np.ndarray:
        return np.array([r[key] for r in rows if r[key] is not None], np.float64)

    de, fo, lo = vals("de2000"), vals("foreign"), vals("local_de2000")
    gl, be, kept = vals("glasses_leak"), vals("beard_leak"), vals("glasses_kept")
    closer = np.mean([r["d_source"] < r["d_target"] for r in rows])
    return {"pairs": len(rows), "de2000_mean": float(de.mean()), "de2000_max": float(de.max()),
            "de2000_ok": float(np.mean(de <= GOALS["de2000"])),
            "local_de2000_mean": float(lo.mean()), "local_de2000_max": float(lo.max()),
            "foreign_mean": float(fo.mean()), "foreign_max": float(fo.max()),
            "foreign_ok": float(np.mean(fo <= GOALS["foreign"])),
            "glasses_leak_max": float(gl.max()) if len(gl) else 0.0,
            "beard_leak_max": float(be.max()) if len(be) else 0.0,
            "glasses_kept_min": float(kept.min()) if len(kept) else 1.0,
            "closer_to_source": float(closer)}


def print_table(rows: list[dict]) -> dict[str, dict[str, float]]:
    groups = {light: [r for r in rows if r["light"] == light] for light in LIGHTS}
    groups["all"] = rows
    out = {}
    print(f"{'light':6} {'pairs':>5} {'dE00 mean/max':>14} {'dE<=4':>6} {'local dE00':>11} "
          f"{'foreign% mean/max':>18} "
          f"{'<=1%':>5} {'glasses leak%':>13} {'beard leak%':>11} {'glasses kept':>12} "
          f"{'closer src':>10}")
    for name, group in groups.items():
        s = out[name] = summary(group)
        print(f"{name:6} {s['pairs']:>5} {s['de2000_mean']:>6.2f}/{s['de2000_max']:<7.2f} "
              f"{s['de2000_ok']:>6.2f} "
              f"{s['local_de2000_mean']:>5.2f}/{s['local_de2000_max']:<5.2f} "
              f"{100 * s['foreign_mean']:>8.2f}/"
              f"{100 * s['foreign_max']:<9.2f}"
              f"{s['foreign_ok']:>5.2f} {100 * s['glasses_leak_max']:>13.2f} "
              f"{100 * s['beard_leak_max']:>11.2f} {s['glasses_kept_min']:>12.2f} "
              f"{s['closer_to_source']:>10.2f}")
    print(f"{'goal':6} {'':>5} {'<=4 each':>14} {'1.00':>6} {'lower':>11} {'<=1 each':>18} "
          f"{'1.00':>5} "
          f"{'0':>13} {'0':>11} {'>=0.9':>12} {'>=0.9':>10}")
    return out


def worst_grid(rows: list[dict], outs: dict, people: list[HardFace],
               targets: list[HardFace], n: int = 12) -> np.ndarray:
    """Rows: the ``n`` worst pairs (by dE00 + foreign share); tiles: target, source, output."""
    by_person = {p.person: p for p in people}
    by_target = {(t.person, t.light): t for t in targets}
    ranked = sorted(rows, key=lambda r: -(r["de2000"] / 4.0 + r["foreign"] / 0.01))[:n]
    lines = []
    for r in ranked:
        t = by_target[(r["target"], r["light"])]
        s = by_person[r["source"]]
        xy = t.face.landmarks_xy
        tiles = [tile(t.face.image_bgr, xy), tile(s.face.image_bgr, s.face.landmarks_xy),
                 tile(outs[(r["source"], r["target"], r["light"])], xy)]
        line = np.hstack(tiles)
        cv2.putText(line, f"{r['light']} dE {r['de2000']:.1f} f {100 * r['foreign']:.1f}%",
                    (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
        lines.append(line)
    half = (len(lines) + 1) // 2
    left, right = lines[:half], lines[half:]
    right += [np.zeros_like(lines[0])] * (half - len(right))
    return np.hstack([np.vstack(left), np.vstack(right)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every pair's scores here")
    parser.add_argument("--grid", type=Path, help="write the worst pairs as a PNG here")
    parser.add_argument("--cache", type=Path,
                        help="keep the analysed hard set in this pickle (faster re-runs)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a swap config override (repeatable), e.g. colour=lab")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    overrides: dict[str, object] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        current = getattr(SwapConfig(), key)
        overrides[key] = (value.lower() in ("1", "true", "yes")) if isinstance(current, bool) \
            else type(current)(value)
    config = replace(SwapConfig(), **overrides)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    rows, outs, people, targets = judge(config, args.cache)
    print(f"{len(people)} people x {len(LIGHTS)} lights, {len(rows)} pairs "
          f"({time.perf_counter() - t0:.0f} s); overrides {overrides or 'none'}")
    table = print_table(rows)
    if args.json:
        args.json.write_text(json.dumps({"overrides": overrides, "goals": GOALS,
                                         "summary": table, "pairs": rows}, indent=1))
    if args.grid:
        cv2.imwrite(str(args.grid), worst_grid(rows, outs, people, targets))
        print(f"grid of the worst pairs written to {args.grid} (target | source | output)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

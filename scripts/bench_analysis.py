"""Benchmark and measure face analysis on clips built from real photos; print tables, write JSON.

    python -m scripts.bench_analysis [--frames 90] [--json bench_analysis.json] [--quick]
                                     [--realtime] [--faces 1 6]

Sections: (1) per-frame cost at 1280x720 with 1 and 6 faces (``--faces``), the shipped
analysis config (``default``) and, where the package has the knob, the whole-frame detector
only every ``detect_every_n_frames`` frames (``no-each-frame``: what fail-closed costs), plus
ms per extra face; (2) tracking metrics (motmetrics MOTA/IDF1/switches) on the standard
clips; (3) landmark jitter of a still face with sensor noise, before/after smoothing, and
smoothing lag on pans.

``--realtime`` adds live-mode rows to (1): the stage as ``livecam run`` builds it in live mode
(tile search on a worker thread), frames handed over at the capture rate (30 fps, as a camera
would) instead of back to back. The script uses only the public analysis API, so it also
measures another checkout: ``PYTHONPATH=/path/to/before python -m scripts.bench_analysis``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import numpy as np


def _run(stage_cfg, frames, fps=30.0, realtime=False):  # type: ignore[no-untyped-def]
    from livecam.analysis import build_stages
    from livecam.core.types import Frame, Packet

    stage = build_stages(stage_cfg, fps=fps, realtime=realtime)[0]
    faces, times = [], []
    period_ns = int(1e9 / fps)
    with stage:
        t_next = time.perf_counter_ns()
        for i, image in enumerate(frames):
            if realtime:  # a camera delivers a frame every 1/fps s, not back to back
                time.sleep(max(0.0, (t_next - time.perf_counter_ns()) / 1e9))
                t_next += period_ns
            t = time.perf_counter_ns()
            faces.append(stage.process(Packet.from_frame(Frame(i, 0, image))).faces)
            times.append((time.perf_counter_ns() - t) / 1e6)
    return faces, np.array(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=90)
    parser.add_argument("--json", default="bench_analysis.json")
    parser.add_argument("--quick", action="store_true", help="cost section only")
    parser.add_argument("--realtime", action="store_true",
                        help="also measure live mode (detection on a worker thread, 30 fps)")
    parser.add_argument("--faces", type=int, nargs="+", default=[1, 6],
                        help="face counts for the cost section (1..6)")
    args = parser.parse_args()

    from insightface.data import get_image
    from skimage.data import astronaut

    from livecam.config.analysis import AnalysisConfig
    from tests.helpers.clips import (
        Trajectory,
        face_sprites,
        make_clip,
        score_tracking,
        tracking_scenarios,
    )

    sprites = face_sprites(np.ascontiguousarray(astronaut()[:, :, ::-1])) + face_sprites(
        get_image("t1"))
    report: dict[str, object] = {}
    base = AnalysisConfig()

    # (1) cost at 1280x720
    cost = []
    n = args.frames
    has_each = hasattr(base, "detect_each_frame")
    configs = [("default", base)]
    if has_each:
        configs.append(("no-each-frame", dataclasses.replace(base, detect_each_frame=False)))
    t1_people = face_sprites(get_image("t1"))
    for n_faces in args.faces:
        # faces ~170 px wide on a row (6 fit across 1280 px), drifting slowly
        xs = np.linspace(110, 1170, n_faces) if n_faces > 1 else np.array([560.0])
        trajs = [Trajectory.linear((x, 300), (x + 40, 360), n, 170 if n_faces < 6 else 150)
                 for x in xs]
        frames, _ = make_clip(t1_people[:n_faces], trajs, (1280, 720), noise_sigma=2.0)
        for label, cfg in configs:
            cfg = dataclasses.replace(cfg, max_faces=max(n_faces, cfg.max_faces))
            for live in ([False, True] if args.realtime else [False]):
                faces, ms = _run(cfg, frames, realtime=live)
                ms = ms[10:]  # warm-up
                found = float(np.mean([len(f) for f in faces[10:]]))
                cost.append({"faces": n_faces, "config": label,
                             "mode": "live" if live else "offline",
                             "p50_ms": round(float(np.percentile(ms, 50)), 2),
                             "p90_ms": round(float(np.percentile(ms, 90)), 2),
                             "p99_ms": round(float(np.percentile(ms, 99)), 2),
                             "mean_ms": round(float(ms.mean()), 2), "faces_found_mean": found})
    print(f"\ncost per frame, 1280x720 (load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores)")
    print(f"{'faces':>5} {'config':>14} {'mode':>8} {'p50 ms':>8} {'p90 ms':>8} "
          f"{'p99 ms':>8} {'mean ms':>8} {'found':>6}")
    for row in cost:
        print(f"{row['faces']:>5} {row['config']:>14} {row['mode']:>8} "
              f"{row['p50_ms']:>8} {row['p90_ms']:>8} {row['p99_ms']:>8} {row['mean_ms']:>8} "
              f"{row['faces_found_mean']:>6.2f}")
    lo, hi = min(args.faces), max(args.faces)
    for label, _ in configs:
        for mode in ("offline", "live"):
            a = [r for r in cost if r["config"] == label and r["mode"] == mode]
            if len(a) >= 2 and hi > lo:
                m_lo = next(r["mean_ms"] for r in a if r["faces"] == lo)
                m_hi = next(r["mean_ms"] for r in a if r["faces"] == hi)
                per = (m_hi - m_lo) / (hi - lo)
                print(f"  {label} {mode}: {per:.2f} ms per extra face (mean, {lo} -> {hi})")
                cost.append({"config": label, "mode": mode, "ms_per_extra_face": round(per, 2)})
    report["cost_1280x720"] = cost

    if not args.quick:
        # (2) tracking
        tracking = {}
        for name, (trajs, occs) in tracking_scenarios().items():
            people = [sprites[1], sprites[2]] if name == "crossing" else sprites[: len(trajs)]
            frames, truth = make_clip(people, trajs, (960, 540), occluders=occs)
            faces, _ = _run(base, frames)
            tracking[name] = score_tracking(truth, [f.track_ids for f in faces],
                                            [f.boxes_xyxy for f in faces])
        print("\ntracking (960x540, 60 frames)")
        print(f"{'clip':>14} {'MOTA':>6} {'IDF1':>6} {'switch':>6} {'FP':>4} {'miss':>5}")
        for name, m in tracking.items():
            print(f"{name:>14} {m['mota']:>6.3f} {m['idf1']:>6.3f} {m['num_switches']:>6.0f} "
                  f"{m['num_false_positives']:>4.0f} {m['num_misses']:>5.0f}")
        report["tracking"] = tracking

        # (3) stability and lag
        stability = []
        for sigma in (2.0, 5.0):
            traj = Trajectory.still((320, 240), 60, 160)
            frames, _ = make_clip([sprites[0]], [traj], (640, 480), noise_sigma=sigma, seed=7)
            row = {"sigma": sigma}
            for label, cfg in (("detect_every_frame_raw", dataclasses.replace(
                    base, smoothing=False, detect_every_n_frames=1)),
                    ("tracked_raw", dataclasses.replace(base, smoothing=False)),
                    ("tracked_smoothed", base)):
                faces, _ = _run(cfg, frames)
                xy = np.stack([f.landmarks_xy[0] for f in faces[10:]])
                row[label] = round(float(xy.std(axis=0).mean()), 4)
            stability.append(row)
        print("\nstill-face landmark jitter (mean per-point std over frames, px)")
        for row in stability:
            print("  ", row)
        lags = []
        for px_per_frame in (3.0, 10.0):
            traj = Trajectory.linear((120, 240), (120 + px_per_frame * 59, 240), 60, 160)
            frames, _ = make_clip([sprites[0]], [traj], (960 if px_per_frame > 5 else 640, 480),
                                  noise_sigma=2.0, seed=7)
            raw = np.stack([f.landmarks_xy[0] for f in _run(
                dataclasses.replace(base, smoothing=False), frames)[0]])
            smooth = np.stack([f.landmarks_xy[0] for f in _run(base, frames)[0]])
            lag_px = float(np.abs((raw - smooth)[15:, :, 0].mean(axis=1)).mean())
            lags.append({"px_per_frame": px_per_frame, "px_per_s_at_30fps": px_per_frame * 30,
                         "lag_px": round(lag_px, 3), "lag_frames": round(lag_px / px_per_frame, 3)})
        print("\nsmoothing lag on a pan (smoothed vs unsmoothed landmarks)")
        for row in lags:
            print("  ", row)
        report["stability"] = stability
        report["lag"] = lags

    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

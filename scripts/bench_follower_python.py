"""Time the face follower's host-side Python per call (µs, median) for 1 and 4 faces; print a
table, write JSON.

    python -m scripts.bench_follower_python [--json bench_follower_python.json]
                                            [--calls 2000] [--baseline before.json]

Many camera streams share one Python process and their per-frame Python holds the GIL, so the
follower's own Python (tracker, Kalman filter, ROIs, smoothing, box arithmetic), not its
networks, bounds how many streams fit. This script times that Python on realistic inputs
without a GPU or a model: faces of 468 mesh points on a 1920x1080 frame, drifting a few px
per frame. ``FaceFollower.follow`` runs end to end on fake networks (:class:`FakeNetworks`,
through the follower's public ``FaceNetworks`` / ``TileSearch`` seam) whose answers are
computed before timing; their (small) lookup time is measured and subtracted in the
``follow (host)`` row. ``--baseline`` adds the numbers of an earlier run and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from livecam.analysis import mesh_runs
from livecam.analysis.detect import SearchResult, merge_detections
from livecam.analysis.follower import FaceFollower
from livecam.analysis.landmarks import six_keypoints
from livecam.analysis.mesh import MeshResult
from livecam.analysis.observations import any_overlap, mesh_observation, overlaps
from livecam.analysis.roi import Roi, boxes_from_landmarks, roi_from_landmarks
from livecam.analysis.smooth import LandmarkSmoother
from livecam.config.analysis import AnalysisConfig
from livecam.core.types import Faces, ImageBGR, WithheldFaces
from livecam.track.bytetrack import ByteTracker, TrackResult, iou_matrix
from livecam.track.kalman import KalmanBoxFilter, xyxy_to_xyah

T = TypeVar("T")
FRAME_WH = (1920, 1080)
FACE_COUNTS = (1, 4)


class FakeScene:
    """``n_faces`` faces of ``k`` mesh points moving over ``n_frames`` frames (3 px/frame
    right and back, a slow wobble, 0.3 px landmark noise), and what the networks see of them on each
    frame: mesh landmarks (K, 2) and depth (K,) float32, detection box (tighter at the top
    than the mesh's, as BlazeFace's is), score and six keypoints."""

    def __init__(self, n_faces: int, n_frames: int, *, k: int = 468, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        angle = rng.uniform(0, 2 * np.pi, k)
        radius = np.sqrt(rng.uniform(0, 1, k))
        template = np.stack([0.5 * radius * np.cos(angle), 0.62 * radius * np.sin(angle)], 1)
        template[33], template[263] = (-0.33, -0.12), (0.33, -0.12)  # eye corners: roll 0
        depth = -0.2 * (1 - radius**2)
        width_px = 220.0 if n_faces == 1 else 200.0
        xs = np.linspace(300, 1500, n_faces) if n_faces > 1 else np.array([800.0])
        self.frame = 0
        self.marks: list[list[MeshResult]] = []
        self.faces: list[Faces] = []
        for t in range(n_frames):
            meshes, found = [], []
            for i, x0 in enumerate(xs):
                cx = x0 + 3.0 * min(t % 200, 200 - t % 200) + 10.0 * np.sin(t / 15 + i)
                cy = 540.0 + 6.0 * np.sin(t / 20 + i)
                xy = (template * width_px + (cx, cy) + rng.normal(0, 0.3, (k, 2))).astype(
                    np.float32)
                meshes.append(MeshResult(xy, (depth * width_px).astype(np.float32)))
                lo, hi = xy.min(0), xy.max(0)
                box = np.array([lo[0], lo[1] + 0.12 * (hi[1] - lo[1]), hi[0], hi[1]],
                               np.float32)
                found.append((box, float(0.9 + 0.05 * rng.random()),
                              six_keypoints(xy[None])[0]))
            self.marks.append(meshes)
            self.faces.append(merge_detections(found, 64))


class FakeNetworks:
    """:class:`~livecam.analysis.networks.FaceNetworks` over a :class:`FakeScene`: ``detect``
    returns the frame's detections, ``landmarks`` the mesh of the face nearest each ROI's
    centre (None when none is within a third of its side). ``spent_ns`` adds up its time."""

    def __init__(self, scene: FakeScene) -> None:
        self.scene = scene
        self.spent_ns = 0

    @property
    def num_landmarks(self) -> int:
        return int(self.scene.marks[0][0].landmarks_xy.shape[0])

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def detect(self, image_bgr: ImageBGR) -> Faces:
        return self.scene.faces[self.scene.frame]

    def landmarks(self, image_bgr: ImageBGR, rois: Sequence[Roi]) -> list[MeshResult | None]:
        t = time.perf_counter_ns()
        meshes = self.scene.marks[self.scene.frame]
        boxes = self.scene.faces[self.scene.frame].boxes_xyxy
        out: list[MeshResult | None] = []
        for roi in rois:
            best, best_d = None, roi.size_px / 3
            for mesh, box in zip(meshes, boxes.tolist(), strict=True):
                d = max(abs(0.5 * (box[0] + box[2]) - roi.center_x_px),
                        abs(0.5 * (box[1] + box[3]) - roi.center_y_px))
                if d < best_d:
                    best, best_d = mesh, d
            out.append(best)
        self.spent_ns += time.perf_counter_ns() - t
        return out


class FakeSearch:
    """A :class:`~livecam.analysis.networks.TileSearch` that finds nothing (no small faces)."""

    on_caller_thread = True
    deferred = False

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def search(self, image_bgr: ImageBGR, *, all_tiles: bool = False) -> SearchResult:
        return SearchResult(Faces.empty(), np.zeros((0, 4), np.float32))


class FakeEdgeSearch:
    """A :class:`~livecam.analysis.edges.EdgeSearch` that finds nothing: the edge strips are
    the detector's input pictures (copied and mirrored in C, as the detector resizes its own),
    networks' work that these fakes stand in for, not the follower's Python."""

    def ahead(self, image_bgr: ImageBGR) -> None:
        pass

    def find(self, image_bgr: ImageBGR) -> list[tuple[Faces, np.ndarray]]:
        return []


def median_us(fn: Callable[[], object], calls: int) -> float:
    """Median µs of ``calls`` calls of ``fn`` (each timed alone: stateful calls advance)."""
    times = np.empty(calls)
    for i in range(calls):
        t = time.perf_counter_ns()
        fn()
        times[i] = time.perf_counter_ns() - t
    return float(np.median(times)) / 1e3


def _cycle(items: Sequence[T]) -> Callable[[], T]:
    """The next of ``items`` on each call, round and round."""
    state = {"i": 0}

    def nxt() -> T:
        state["i"] += 1
        return items[state["i"] % len(items)]
    return nxt


def bench_faces(n_faces: int, calls: int) -> dict[str, float]:
    """Every row of the table for ``n_faces`` faces: µs per call."""
    frames = 400
    scene = FakeScene(n_faces, frames)
    image = np.zeros((FRAME_WH[1], FRAME_WH[0], 3), np.uint8)
    marks = [[m.landmarks_xy for m in ms] for ms in scene.marks]
    boxes = [f.boxes_xyxy for f in scene.faces]
    scores = [f.scores for f in scene.faces]
    row: dict[str, float] = {}

    kf = KalmanBoxFilter()
    rows = boxes[0].astype(np.float64).tolist()
    xyah = [xyxy_to_xyah(b) for b in rows]
    states = [kf.initiate(z) for z in xyah]
    means, covs = np.stack([s[0] for s in states]), np.stack([s[1] for s in states])
    for _ in range(5):
        means, covs = kf.predict(means, covs)
    row["kalman.predict (batch)"] = median_us(lambda: kf.predict(means, covs), calls)
    row["kalman.update (each face)"] = n_faces * median_us(
        lambda: kf.update(means[0], covs[0], xyah[0]), calls)
    row["xyxy_to_xyah (each face)"] = n_faces * median_us(lambda: xyxy_to_xyah(rows[0]),
                                                          calls)
    row["iou_matrix (N x N)"] = median_us(lambda: iou_matrix(boxes[0], boxes[1]), calls)

    tracker = ByteTracker()
    step = _cycle(list(range(frames)))

    def track() -> TrackResult:
        t = step()
        return tracker.update(boxes[t], scores[t], frame_size_px=FRAME_WH)
    for _ in range(20):
        track()
    assert len(track()) == n_faces, "the tracker should follow every face"
    row["ByteTracker.update"] = median_us(track, calls)

    frame_marks = _cycle(marks)
    row["roi_from_landmarks (each face)"] = n_faces * median_us(
        lambda: roi_from_landmarks(frame_marks()[0]), calls)
    stacked = [np.stack(m) for m in marks]
    frame_stack = _cycle(stacked)
    row["boxes_from_landmarks (N, K, 2)"] = median_us(
        lambda: boxes_from_landmarks(frame_stack()), calls)
    row["six_keypoints (N, K, 2)"] = median_us(
        lambda: six_keypoints(frame_stack()), calls)

    smoother = LandmarkSmoother(max_lag=0.03)
    z = scene.marks[0][0].landmarks_z
    row["LandmarkSmoother.smooth (each face)"] = n_faces * median_us(
        lambda: smoother.smooth(1, frame_marks()[0], z, 1 / 30), calls)

    found = [(f.boxes_xyxy[i], float(f.scores[i]), f.keypoints_xy[i])
             for f in scene.faces[:1] for i in range(len(f))]
    row["merge_detections"] = median_us(lambda: merge_detections(found, 64), calls)

    obs = [mesh_observation(m, 0.9, i + 1) for i, m in enumerate(scene.marks[0])]
    others = [o.box_xyxy for o in obs]
    row["overlaps (one box vs N)"] = median_us(lambda: overlaps(others[0], others), calls)
    row["any_overlap (N)"] = median_us(lambda: any_overlap(obs), calls)

    nets = FakeNetworks(scene)
    follower = FaceFollower(AnalysisConfig(max_faces=max(6, n_faces)), nets, FakeSearch(),
                            fps=30.0, edge_search=FakeEdgeSearch())
    follower.open()
    index = _cycle(list(range(frames)))
    spent: list[int] = []

    def follow() -> tuple[Faces, WithheldFaces]:
        scene.frame = index()
        before = nets.spent_ns
        out = follower.follow(image, scene.frame)
        spent.append(nets.spent_ns - before)
        return out
    for _ in range(30):
        follow()
    assert len(follow()[0]) == n_faces, "the follower should swap every face"
    spent.clear()
    total = median_us(follow, calls)
    row["FaceFollower.follow"] = total
    row["FaceFollower.follow (host: less fake networks)"] = total - float(
        np.median(spent)) / 1e3

    carried_marks = dict(follower._marks)
    velocities = follower.tracker.velocities_px()
    track_scores = dict(follower._scores)
    row["mesh_runs.carry"] = median_us(lambda: mesh_runs.carry(
        nets, image, carried_marks, velocities, track_scores, 1, {}), calls)
    carried = mesh_runs.carry(nets, image, carried_marks, velocities, track_scores, 1, {})
    whole = scene.faces[scene.frame]
    row["mesh_runs.verified"] = median_us(
        lambda: mesh_runs.verified(nets, image, carried, whole, {}), calls)
    follower.close()
    return row


def report(title: str, results: dict[int, dict[str, float]], *, calls: int, json_path: str,
           baseline: str | None) -> None:
    """Print ``results`` (faces -> row -> µs) as a table beside ``baseline``'s (the JSON of
    an earlier run, or None) and write them to ``json_path``."""
    counts = tuple(results)
    base: dict[str, dict[str, float]] = {}
    if baseline:
        with open(baseline, encoding="utf-8") as fh:
            base = json.load(fh)["us_per_call"]
    print(f"\n{title}: µs per call, median of {calls} (python {platform.python_version()}, "
          f"numpy {np.__version__}, load average {os.getloadavg()[0]:.1f})")
    head = f"{'function':<48}" + "".join(f"{f'{n} face':>10}" for n in counts)
    if base:
        head += "".join(f"{f'was {n}':>10}{'x':>7}" for n in counts)
    print(head)
    for name in results[counts[0]]:
        line = f"{name:<48}" + "".join(f"{results[n][name]:>10.1f}" for n in counts)
        for n in counts if base else ():
            was = base.get(str(n), {}).get(name)
            line += (f"{was:>10.1f}{was / max(results[n][name], 1e-9):>7.2f}" if was
                     else f"{'':>17}")
        print(line)
    out = {"us_per_call": {str(n): {k: round(v, 2) for k, v in r.items()}
                           for n, r in results.items()},
           "calls": calls, "python": platform.python_version(),
           "numpy": np.__version__, "machine": platform.machine()}
    with open(json_path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)
    print(f"\nwrote {json_path}")


def cli(title: str, description: str, bench: Callable[[int, int], dict[str, float]],
        default_json: str) -> None:
    """The command line of a host-Python benchmark: ``bench(faces, calls)`` for each of
    ``FACE_COUNTS``, then :func:`report`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", default=default_json)
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per row")
    parser.add_argument("--baseline", default=None,
                        help="JSON of an earlier run: its numbers and the ratio are shown")
    args = parser.parse_args()
    report(title, {n: bench(n, args.calls) for n in FACE_COUNTS}, calls=args.calls,
           json_path=args.json, baseline=args.baseline)


def main() -> None:
    cli("The face follower's host Python", __doc__.splitlines()[0], bench_faces,
        "bench_follower_python.json")


if __name__ == "__main__":
    main()

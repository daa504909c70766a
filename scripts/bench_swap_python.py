"""Time the GPU swap stage's host-side Python per frame (µs, median) for 1 and 4 faces; print
a table, write JSON.

    python -m scripts.bench_swap_python [--json bench_swap_python.json] [--calls 2000]
                                        [--baseline before.json]

Each stream's swap stage (:class:`~livecam.gpupipe.stage.GpuSwapStage`) runs Python on its
pipeline thread for every frame (who gets which identity, the faces' keypoints and kept eyes
and mouth, the request to the hub) and on its collector thread (the swapped frame copied out,
each face's swap remembered for ``hold``). With many streams in one process that Python holds
the GIL beside the followers' (H200 run 89: 0.6 ms a frame on the submitting thread, 0.3 on
the collector). This script times it without a GPU or a model: the faces of
``bench_follower_python.py``'s scene (468 mesh points, 1920x1080), the frame already on the
device as on CUDA (no copy into a pinned buffer), and :class:`RowsHub` in place of the hub,
through the stage's hub seam: it does the hub's host work for a tick of one frame (the tick's
face rows, written into a slot's host rows as the scheduler writes them) and hands the frame
straight back. The GPU's own work (uploads, graph replays) is not here.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from livecam.analysis.landmarks import five_point
from livecam.analysis.roi import boxes_from_landmarks
from livecam.core.types import Faces, Frame, Packet, RuntimeState, Unswappable
from livecam.gpupipe.request import SwapRequest, tick_rows
from livecam.gpupipe.slots import FaceRows, FrameBuffers
from livecam.gpupipe.stage import GpuSwapStage
from livecam.gpupipe.swap.keep import loop_rows_batch
from livecam.swap.cover import FaceCover
from scripts.bench_follower_python import FRAME_WH, FakeScene, _cycle, cli, median_us

LATENT_DIM = 512
#: the scheduler's padding keypoints (any benign square: these rows are never pasted)
PAD_KPS = np.array([[0, 0], [64, 0], [32, 32], [0, 64], [64, 64]], np.float32)


class RowsHub:
    """Stands in for :class:`~livecam.gpupipe.hub.GpuSwapHub` (the stage's seam): each
    request is a tick of its own whose face rows are made (:func:`tick_rows`) and written
    into a slot's host rows (:meth:`FaceRows.write`), as the hub and its scheduler do on the
    launching thread; then it is done at once, every face fitting its paste window."""

    keep, hands, capacity, max_faces, windows_px = True, False, 3, 8, (640,)

    def __init__(self) -> None:
        self._latent = np.random.default_rng(0).random(LATENT_DIM).astype(np.float32)
        self._rows = FaceRows.allocate(self.max_faces, LATENT_DIM, device=None, pinned=False)

    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass

    def prepare(self, width_px: int, height_px: int) -> None:
        pass

    def buffers(self, height_px: int, width_px: int) -> FrameBuffers:
        return FrameBuffers(height_px, width_px, self.capacity, pinned=False)

    def latent(self, name: str) -> np.ndarray | Unswappable:
        return self._latent

    def prepare_identities(self, names: tuple[str, ...]) -> None:
        pass

    def submit(self, request: SwapRequest) -> None:
        rows = tick_rows([request])
        self._rows.write(rows, len(rows), PAD_KPS)
        request.fits = np.ones(len(rows), bool)
        request.done.set()


def scene_packets(n_faces: int, frames: int) -> list[Packet]:
    """The scene's frames as the follower hands them on: every face meshed and tracked."""
    scene = FakeScene(n_faces, frames)
    image = np.zeros((FRAME_WH[1], FRAME_WH[0], 3), np.uint8)
    state = RuntimeState(active_identity="alice", identities=("alice",))
    packets = []
    for t, meshes in enumerate(scene.marks):
        xy = np.stack([m.landmarks_xy for m in meshes])
        faces = Faces(boxes_xyxy=boxes_from_landmarks(xy),
                      scores=np.full(n_faces, 0.9, np.float32),
                      keypoints_xy=np.zeros((n_faces, 6, 2), np.float32), landmarks_xy=xy,
                      landmarks_z=np.stack([m.landmarks_z for m in meshes]),
                      track_ids=np.arange(1, n_faces + 1, dtype=np.int64))
        packets.append(Packet(frame=Frame(t, 0, image), image_bgr=image, faces=faces,
                              state=state))
    return packets


def bench_faces(n_faces: int, calls: int) -> dict[str, float]:
    """Every row of the table for ``n_faces`` faces: µs per call."""
    packets = scene_packets(n_faces, 200)
    row: dict[str, float] = {}
    stage = GpuSwapStage(RowsHub(), keep_eyes=True, keep_mouth=True,
                         device_frame=lambda image: (None, None))
    stage.open()
    stage.prepare(*FRAME_WH)
    step = _cycle(packets)
    for _ in range(20):
        stage.submit(step())
        stage.collect(1.0)
    frame = np.full((FRAME_WH[1], FRAME_WH[0], 3), 7, np.uint8)  # pages touched, as a buffer's
    copy_out = median_us(frame.copy, calls)
    submit_ns, collect_ns = np.empty(calls), np.empty(calls)
    for i in range(calls):  # one frame in flight at a time: each stream's bound is slots
        packet = step()
        t0 = time.perf_counter_ns()
        stage.submit(packet)
        t1 = time.perf_counter_ns()
        assert stage.collect(1.0) is not None
        submit_ns[i], collect_ns[i] = t1 - t0, time.perf_counter_ns() - t1
    row["GpuSwapStage.submit (frame on the device)"] = float(np.median(submit_ns)) / 1e3
    row["GpuSwapStage.collect (less the frame's copy)"] = (
        float(np.median(collect_ns)) / 1e3 - copy_out)
    row["the swapped frame's copy out (1080p)"] = copy_out
    stage.close()

    faces = packets[0].faces
    row["five_point (N, K, 2)"] = median_us(lambda: five_point(faces.landmarks_xy), calls)
    row["loop_rows_batch (N, K, 2)"] = median_us(
        lambda: loop_rows_batch(faces.landmarks_xy, eyes=True, mouth=True), calls)
    hub = RowsHub()
    request = SwapRequest(0, hub.buffers(*FRAME_WH[::-1]), 0,
                          five_point(faces.landmarks_xy), np.stack([hub._latent] * n_faces))
    request.keep_xy, request.keep_soft = loop_rows_batch(faces.landmarks_xy, eyes=True,
                                                         mouth=True)
    row["tick_rows (one request)"] = median_us(lambda: tick_rows([request]), calls)
    rows = tick_rows([request])
    row["FaceRows.write (host rows)"] = median_us(
        lambda: hub._rows.write(rows, len(rows), PAD_KPS), calls)
    cover = FaceCover()
    index = itertools.count()
    names = ["alice"] * n_faces
    row["FaceCover.remember"] = median_us(
        lambda: cover.remember(frame, faces, next(index), identities=names), calls)
    return row


def main() -> None:
    cli("The GPU swap stage's host Python", __doc__.splitlines()[0], bench_faces,
        "bench_swap_python.json")


if __name__ == "__main__":
    main()

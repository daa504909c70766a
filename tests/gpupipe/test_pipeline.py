"""The GPU frame pipeline, run on the CPU: results equal the CPU neural swap, ROIs chain from
tick to tick, faces of several streams batch into one call without changing any stream's
output, padding slots change nothing, and the naive baseline computes the same frame."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from livecam.gpupipe.baseline import NaiveBaseline
from livecam.gpupipe.scheduler import GpuScheduler
from livecam.gpupipe.slots import SlotShape
from tests.gpupipe.conftest import HEIGHT, WIDTH, FaceFrame, fill_with, make_program

ONE = np.zeros(1, np.int64)


def _one_tick(engine: Any, face_frame: FaceFrame, frames: np.ndarray, rois: np.ndarray,
              index: np.ndarray, max_faces: int, n_faces: int | None = None) -> Any:
    program = make_program(engine, max_faces)
    shape = SlotShape(len(frames), HEIGHT, WIDTH, max_faces)
    with GpuScheduler(program, shape, "cpu") as sched:
        sched.submit(fill_with(frames, rois, face_frame.latents, index, True),
                     len(rois) if n_faces is None else n_faces)
        result = sched.collect()
        return result, result.frames_bgr.copy()


@pytest.mark.slow
def test_tick_equals_cpu_neural_swap(cpu_engine: Any, face_frame: FaceFrame,
                                     inswapper_dyn_path: Any) -> None:
    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.swap.neural import InswapperModel

    result, frames = _one_tick(cpu_engine, face_frame, face_frame.frame_bgr[None],
                               face_frame.rois, ONE, 1)
    assert result.presence[0] > 0.9
    lm = result.landmarks_px[:, :, :2]
    # the pipeline's mesh agrees with MediaPipe's own on this frame
    mp_faces = analyze_photo(face_frame.frame_bgr)
    assert len(mp_faces) == 1
    assert np.linalg.norm(lm[0] - mp_faces.landmarks_xy[0, :468], axis=-1).mean() < 2.0
    # and the swapped frame equals the CPU neural swap given the same landmarks
    cpu = InswapperModel(OnnxRuntimeEngine(inswapper_dyn_path, device="cpu"), inswapper_dyn_path)
    cpu.open()
    ref = cpu.swap(face_frame.frame_bgr, five_point(lm), face_frame.latents[:1])
    diff = np.abs(frames[0].astype(int) - ref.astype(int))
    assert (ref != face_frame.frame_bgr).any(axis=-1).mean() > 0.05
    assert diff.mean() < 0.1 and (diff > 3).mean() < 2e-3
    assert bool(result.fits.all())
    # what goes to the host tracker: one face with the mesh's landmarks and a box around them
    faces = result.faces(0)
    assert len(faces) == 1 and faces.has_landmarks
    np.testing.assert_allclose(faces.landmarks_xy[0], lm[0])
    assert len(result.faces(1)) == 0


@pytest.mark.slow
def test_roi_follows_a_moving_face(cpu_engine: Any, face_frame: FaceFrame) -> None:
    program = make_program(cpu_engine, 1)
    with GpuScheduler(program, SlotShape(1, HEIGHT, WIDTH, 1), "cpu") as sched:
        centres = []
        for k in range(4):
            frame = np.roll(face_frame.frame_bgr, shift=12 * k, axis=1)[None]
            if sched.ring_full:
                centres.append(sched.collect().roi_next[0, :2].copy())
            sched.submit(fill_with(frame, face_frame.rois, face_frame.latents, ONE, k == 0), 1)
        while sched.in_flight:
            result = sched.collect()
            centres.append(result.roi_next[0, :2].copy())
            assert result.presence[0] > 0.9  # still tracking without new detections
    steps = np.diff(np.array(centres)[:, 0])
    assert np.all(np.abs(steps - 12.0) < 3.0), steps  # the ROI moved with the face


@pytest.mark.slow
def test_streams_batch_without_changing_outputs(cpu_engine: Any, face_frame: FaceFrame) -> None:
    """Two streams in one tick (faces batched into one generator call) give each stream what
    it gets alone; a padding slot (3 faces in a bucket of 4) changes nothing."""
    alone, frames_alone = _one_tick(cpu_engine, face_frame, face_frame.frame_bgr[None],
                                    face_frame.rois, ONE, 1)
    dimmed = (face_frame.frame_bgr * 0.8).astype(np.uint8)
    both = np.stack([face_frame.frame_bgr, dimmed])
    rois = np.concatenate([face_frame.rois, face_frame.rois, face_frame.rois])
    index = np.array([0, 1, 1], np.int64)
    # stream 1 carries the same face twice (as a second person would be): 3 faces, bucket 4
    res, frames = _one_tick(cpu_engine, face_frame, both, rois, index, 4)
    assert res.n_faces == 3
    np.testing.assert_allclose(res.landmarks_px[0], alone.landmarks_px[0], atol=1e-3)
    diff = np.abs(frames[0].astype(int) - frames_alone[0].astype(int))
    # batch size changes the float summation order, then uint8 truncation may flip a level
    assert diff.max() <= 2 and diff.mean() < 0.01
    assert (frames[1] != dimmed).any()


def test_ring_is_fifo_and_refuses_overflow(cpu_engine: Any, face_frame: FaceFrame) -> None:
    program = make_program(cpu_engine, 1)
    with GpuScheduler(program, SlotShape(1, HEIGHT, WIDTH, 1), "cpu", n_slots=3) as sched:
        fill = fill_with(face_frame.frame_bgr[None], face_frame.rois, face_frame.latents, ONE,
                         True)
        ticks = [sched.submit(fill, 0) for _ in range(3)]
        assert sched.ring_full
        with pytest.raises(RuntimeError, match="collect"):
            sched.submit(fill, 0)
        got = [sched.collect() for _ in range(3)]
        assert [r.tick for r in got] == ticks
        assert [r.slot for r in got] == [0, 1, 2]
        # no faces: detections still come back, the frame is untouched
        assert got[0].det_valid[0].any()
        np.testing.assert_array_equal(got[0].frames_bgr[0], face_frame.frame_bgr)


@pytest.mark.slow
def test_naive_baseline_computes_the_same_frame(cpu_engine: Any, face_frame: FaceFrame) -> None:
    result, frames = _one_tick(cpu_engine, face_frame, face_frame.frame_bgr[None],
                               face_frame.rois, ONE, 1)
    baseline = NaiveBaseline(make_program(cpu_engine, 1))
    out, next_rois = baseline.process(face_frame.frame_bgr, face_frame.rois,
                                      face_frame.latents[:1])
    assert np.abs(out.astype(int) - frames[0].astype(int)).max() <= 1
    np.testing.assert_allclose(next_rois, result.roi_next, atol=1e-3)


def test_slot_shapes_and_buckets() -> None:
    from livecam.gpupipe.graphs import bucket_for, face_buckets
    from livecam.gpupipe.slots import Slot, SlotRing

    assert face_buckets(4) == (0, 1, 2, 4)
    assert face_buckets(6) == (0, 1, 2, 4, 6)
    assert bucket_for(3, face_buckets(4)) == 4
    with pytest.raises(ValueError, match="exceed"):
        bucket_for(5, face_buckets(4))
    with pytest.raises(ValueError, match="at least 2"):
        SlotRing(SlotShape(1, 8, 8, 1), "cpu", n_slots=1)
    slot = Slot.open(0, SlotShape(2, 10, 12, 3, max_detections=5), "cpu")
    assert slot.frames_in_host.shape == (2, 10, 12, 3)
    assert slot.faces_dev.landmarks.shape == (3, 468, 3)
    assert slot.faces_host.det_boxes.shape == (2, 5, 4)
    assert slot.frames_dev.dtype == torch.uint8


def test_detector_runs_only_on_ticks_that_ask(cpu_engine: Any, face_frame: FaceFrame) -> None:
    program = make_program(cpu_engine, 1)
    with GpuScheduler(program, SlotShape(1, HEIGHT, WIDTH, 1), "cpu", n_slots=2) as sched:
        fill = fill_with(face_frame.frame_bgr[None], face_frame.rois, face_frame.latents, ONE,
                         True)
        sched.submit(fill, 1, detect=False)
        skipped = sched.collect()
        assert not skipped.detected and not skipped.det_valid.any()
        assert skipped.presence[0] > 0.9  # the mesh ran from the given ROI all the same
        sched.submit(fill, 1, detect=True)
        found = sched.collect()
        assert found.detected and int(found.det_valid[0].sum()) == 1
        box = found.det_boxes_xyxy[0, 0]
        centre = face_frame.rois[0, :2]
        assert box[0] < centre[0] < box[2] and box[1] < centre[1] < box[3]


def test_program_options_follow_the_gpu_config_section() -> None:
    from livecam.config import load_config
    from livecam.gpupipe.build import ProgramOptions

    config = load_config(None, ["gpu.paste_window_px=512", "gpu.detector_range=full",
                                "gpu.precision=fp32", "gpu.colour_blur_px=9"])
    options = ProgramOptions.from_config(config.gpu)
    assert (options.window_px, options.detector_range, options.precision,
            options.colour_blur_px) == (512, "full", "fp32", 9.0)
    with pytest.raises(ValueError, match=r"gpu\.slots"):
        load_config(None, ["gpu.slots=1"])

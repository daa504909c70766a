"""The GPU swap program and its tick ring, run on the CPU: a tick equals the CPU neural swap,
frames of several streams batch into one tick without changing any frame, padding rows paste
nothing, the ring is FIFO and bounded, and the naive baseline swaps what it finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from livecam.gpupipe.scheduler import GpuScheduler, TickRows
from livecam.gpupipe.slots import FrameBuffers, SlotShape
from tests.gpupipe.conftest import HEIGHT, WIDTH, FaceFrame, assert_same_swap, make_program


def rows(kps: np.ndarray, latents: np.ndarray, index: list[int]) -> TickRows:
    return TickRows(frame_index=np.asarray(index, np.int64), kps=kps.astype(np.float32),
                    latents=latents.astype(np.float32), valid=np.ones(len(index), bool))


def run_tick(engine: Any, frames: list[np.ndarray], tick_rows: TickRows, *,
             max_faces: int = 4, n_frames: int | None = None) -> list[np.ndarray]:
    program = make_program(engine)
    shape = SlotShape(n_frames or len(frames), HEIGHT, WIDTH, max_faces, program.latent_dim)
    buffers = FrameBuffers(HEIGHT, WIDTH, len(frames), pinned=False)
    for k, frame in enumerate(frames):
        buffers.inputs[k].numpy()[:] = frame
    with GpuScheduler(program, shape, "cpu") as sched:
        sched.submit(buffers.inputs, buffers.outputs, tick_rows)
        result = sched.collect()
    assert result.n_faces == len(tick_rows) and result.fits.all()
    return [b.numpy().copy() for b in buffers.outputs]


@pytest.mark.slow
def test_tick_equals_cpu_neural_swap(cpu_engine: Any, face_frame: FaceFrame,
                                     inswapper_dyn_path: Path) -> None:
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.swap.inswapper import InswapperModel

    (out,) = run_tick(cpu_engine, [face_frame.frame_bgr],
                      rows(face_frame.kps, face_frame.latents[:1], [0]))
    cpu = InswapperModel(OnnxRuntimeEngine(inswapper_dyn_path, device="cpu"), inswapper_dyn_path)
    cpu.open()
    ref = cpu.swap(face_frame.frame_bgr, face_frame.kps, face_frame.latents[:1])
    diff = np.abs(out.astype(int) - ref.astype(int))
    assert (ref != face_frame.frame_bgr).any(axis=-1).mean() > 0.05
    assert diff.mean() < 0.1 and (diff > 3).mean() < 2e-3, (diff.mean(), (diff > 3).mean())


@pytest.mark.slow
def test_streams_batch_without_changing_outputs(cpu_engine: Any, face_frame: FaceFrame) -> None:
    """Two streams' frames in one tick (one generator call for both faces) come out exactly
    as each does alone."""
    other = np.ascontiguousarray(face_frame.frame_bgr[:, ::-1])  # the face mirrored
    other_kps = face_frame.kps.copy()
    other_kps[..., 0] = WIDTH - 1 - other_kps[..., 0]
    other_kps = other_kps[:, [1, 0, 2, 4, 3]]  # mirrored: image-left and -right swap
    both = run_tick(cpu_engine, [face_frame.frame_bgr, other],
                    rows(np.concatenate([face_frame.kps, other_kps]), face_frame.latents[:2],
                         [0, 1]))
    (alone0,) = run_tick(cpu_engine, [face_frame.frame_bgr],
                         rows(face_frame.kps, face_frame.latents[:1], [0]))
    (alone1,) = run_tick(cpu_engine, [other], rows(other_kps, face_frame.latents[1:2], [0]))
    assert (both[0] != face_frame.frame_bgr).any() and (both[1] != other).any()
    assert_same_swap(both[0], alone0)  # batch 2 against batch 1
    assert_same_swap(both[1], alone1)


@pytest.mark.slow
def test_padding_rows_paste_nothing(cpu_engine: Any, face_frame: FaceFrame) -> None:
    """Three faces run in the bucket of four: the padding row computes but never pastes."""
    kps = np.concatenate([face_frame.kps] * 3)
    (padded,) = run_tick(cpu_engine, [face_frame.frame_bgr],
                         rows(kps, face_frame.latents[:3], [0, 0, 0]), max_faces=4)
    (exact,) = run_tick(cpu_engine, [face_frame.frame_bgr],
                        rows(kps, face_frame.latents[:3], [0, 0, 0]), max_faces=3)
    assert_same_swap(padded, exact)  # batch 4 against batch 3


def test_ring_is_fifo_and_refuses_overflow(cpu_engine: Any, face_frame: FaceFrame) -> None:
    program = make_program(cpu_engine)
    shape = SlotShape(1, HEIGHT, WIDTH, 1, program.latent_dim)
    buffers = FrameBuffers(HEIGHT, WIDTH, 4, pinned=False)
    one = rows(face_frame.kps, face_frame.latents[:1], [0])
    with GpuScheduler(program, shape, "cpu", n_slots=3) as sched:
        ticks = [sched.submit([buffers.inputs[k]], [buffers.outputs[k]], one) for k in range(3)]
        assert sched.ring_full and sched.in_flight == 3
        with pytest.raises(RuntimeError, match="collect"):
            sched.submit([buffers.inputs[3]], [buffers.outputs[3]], one)
        assert [sched.collect().tick for _ in range(3)] == ticks
        with pytest.raises(ValueError, match="exceed the largest bucket"):
            sched.submit([buffers.inputs[0]], [buffers.outputs[0]],
                         rows(np.concatenate([face_frame.kps] * 2), face_frame.latents[:2],
                              [0, 0]))


def test_slot_shapes_and_buckets() -> None:
    from livecam.gpupipe.graphs import bucket_for, face_buckets

    assert face_buckets(1) == (0, 1)
    assert face_buckets(6) == (0, 1, 2, 4, 6)
    assert face_buckets(16) == (0, 1, 2, 4, 8, 16)
    assert bucket_for(3, face_buckets(6)) == 4 and bucket_for(5, face_buckets(6)) == 6
    with pytest.raises(ValueError):
        SlotShape(0, 10, 10, 1, 512)
    buffers = FrameBuffers(8, 8, 2, pinned=False)
    taken = [buffers.take(), buffers.take()]
    with pytest.raises(RuntimeError, match="in flight"):
        buffers.take()
    buffers.give_back(taken[0])
    assert buffers.take() == taken[0]


def test_a_collected_frame_is_the_output_buffer_itself_and_stays_as_it_was() -> None:
    """The collector takes the swapped frame's buffer (no copy of a full frame a frame and
    stream); the index goes back with a new buffer, so the next frames downloaded there do
    not write into a frame already handed on."""
    buffers = FrameBuffers(4, 6, 2, pinned=False)
    k = buffers.take()
    swapped = buffers.outputs_numpy[k]
    swapped[:] = 7  # the tick's download
    out = buffers.hand_out(k)
    assert out.ctypes.data == swapped.ctypes.data and np.all(out == 7)  # no copy
    assert buffers.take() == 1 - k and buffers.take() == k  # given back
    buffers.outputs[k].fill_(9)  # the next tick's download into the same index
    assert np.all(buffers.outputs_numpy[k] == 9) and np.all(out == 7)


def test_a_handed_out_buffer_is_used_again_only_once_its_frame_is_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame handed on is written again only when nothing refers to it (a view of it
    counts); its buffer then takes the place of the next frame handed out, with no new
    allocation (which lets go of the GIL)."""
    buffers = FrameBuffers(4, 6, 1, pinned=False)
    first = buffers.hand_out(buffers.take())
    first[:] = 5
    memory = first.ctypes.data
    part = first[1:]
    del first
    second = buffers.hand_out(buffers.take())  # the first frame lives on in its view
    buffers.outputs[0].fill_(9)
    assert np.all(part == 5)
    del part
    allocated: list[object] = []
    empty = torch.empty

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        allocated.append(args)
        return empty(*args, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(torch, "empty", counted)
    third = buffers.hand_out(buffers.take())
    monkeypatch.undo()
    assert not allocated and buffers.outputs_numpy[0].ctypes.data == memory
    assert second is not third


@pytest.mark.slow
def test_naive_baseline_swaps_the_face_it_finds(cpu_engine: Any, face_frame: FaceFrame) -> None:
    import os

    from livecam.gpupipe.networks.models import load_blazeface, load_face_mesh
    from tests.helpers.naive_baseline import NaiveBaseline

    models = os.environ.get("LIVECAM_MEDIAPIPE_MODULES")
    baseline = NaiveBaseline(detector=load_blazeface("full", models_dir=models),
                             landmarker=load_face_mesh(models_dir=models),
                             swapper=make_program(cpu_engine).swapper, device="cpu",
                             presence_threshold=0.5)
    out, swapped = baseline.process(face_frame.frame_bgr, face_frame.latents[:2])
    assert swapped == 1
    changed = (out != face_frame.frame_bgr).any(axis=-1)
    x0, y0 = face_frame.landmarks_xy[0].min(axis=0).astype(int)
    x1, y1 = face_frame.landmarks_xy[0].max(axis=0).astype(int)
    assert changed[y0:y1, x0:x1].mean() > 0.3
    near = changed[max(0, y0 - 60):y1 + 60, max(0, x0 - 60):x1 + 60]
    assert changed.sum() == near.sum()  # nothing away from the face was touched


def test_face_rows_travel_in_one_copy_each_way() -> None:
    # every field is a view of one buffer: the inputs go up in one copy, fits comes back in
    # one, and neither copy touches the other side's fields
    from livecam.gpupipe.slots import FaceRows

    host = FaceRows.allocate(3, 8, device=None, pinned=False)
    dev = FaceRows.allocate(3, 8, device=torch.device("cpu"), pinned=False)
    rng = np.random.default_rng(0)
    host.numpy["frame_index"][:] = [2, 0, 1]
    host.numpy["kps"][:] = rng.random((3, 5, 2))
    host.numpy["latents"][:] = rng.random((3, 8))
    host.numpy["valid"][:] = [True, False, True]
    host.numpy["keep_xy"][:] = rng.random(host.keep_xy.shape)
    host.numpy["keep_soft"][:] = [1.5, 2.5, 3.5]
    dev.fits[:] = torch.tensor([True, True, False])
    dev.copy_inputs_from(host)
    for name in ("frame_index", "kps", "latents", "valid", "keep_xy", "keep_soft"):
        assert torch.equal(getattr(dev, name), getattr(host, name)), name
    assert dev.fits.tolist() == [True, True, False]  # an input copy leaves fits alone
    host.copy_outputs_from(dev)
    assert host.numpy["fits"].tolist() == [True, True, False]
    assert host.frame_index.tolist() == [2, 0, 1]

"""CUDA-only checks of the GPU swap: graphs are really captured and replay the eager result,
nothing is allocated per tick after warm-up, and the stream stage on CUDA equals the same
stage on the CPU. Skipped (with the reason) where torch sees no CUDA GPU, as on CI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from livecam.core.types import RuntimeState
from livecam.gpupipe.build import build_program
from livecam.gpupipe.scheduler import GpuScheduler, TickRows
from livecam.gpupipe.slots import FrameBuffers, SlotShape
from tests.gpupipe.conftest import HEIGHT, WIDTH, FaceFrame, make_program

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available"),
]


@pytest.fixture(scope="module")
def cuda_engine(inswapper_dyn_path: Path) -> Any:
    from livecam.engines.torch_engine import TorchEngine

    engine = TorchEngine(inswapper_dyn_path, device="cuda", precision="fp16", cuda_graphs=False)
    engine.open()
    return engine


def _rows(face_frame: FaceFrame) -> TickRows:
    return TickRows(frame_index=np.zeros(1, np.int64), kps=face_frame.kps,
                    latents=face_frame.latents[:1], valid=np.ones(1, bool))


def _run(engine: Any, face_frame: FaceFrame, use_graphs: bool, ticks: int,
         compile_dir: Path | None = None) -> tuple[dict[str, str], np.ndarray]:
    program = build_program(engine, device="cuda", window_px=320, compile_dir=compile_dir)
    shape = SlotShape(1, HEIGHT, WIDTH, 1, program.latent_dim)
    buffers = FrameBuffers(HEIGHT, WIDTH, 4, pinned=True)
    for b in buffers.inputs:
        b.numpy()[:] = face_frame.frame_bgr
    with GpuScheduler(program, shape, "cuda", use_graphs=use_graphs) as sched:
        modes = sched.warmup()
        for k in range(ticks):
            if sched.ring_full:
                sched.collect()
            sched.submit([buffers.inputs[k % 4]], [buffers.outputs[k % 4]], _rows(face_frame))
        while sched.in_flight:
            sched.collect()
    return modes, buffers.outputs[(ticks - 1) % 4].numpy().copy()


def test_graphs_replay_the_eager_result(cuda_engine: Any, face_frame: FaceFrame) -> None:
    modes, graphed = _run(cuda_engine, face_frame, True, 6)
    assert all(m.split(" ")[0] in ("graph", "segmented") for m in modes.values()), modes
    _, eager = _run(cuda_engine, face_frame, False, 6)
    assert (graphed != face_frame.frame_bgr).any()
    diff = np.abs(graphed.astype(int) - eager.astype(int))
    assert diff.max() <= 2 and diff.mean() < 0.01


def test_the_compiled_paste_in_graphs_pastes_what_the_plain_one_pastes(
        cuda_engine: Any, face_frame: FaceFrame, tmp_path: Path) -> None:
    """advanced.gpu.compile_paste: Inductor's kernels captured in the pipeline's graphs, and each
    part saved whole for a later start (run 111: the paste-back could not be, cuDNN's grid
    sampler has no fake-tensor kernel)."""
    modes, compiled = _run(cuda_engine, face_frame, True, 6, compile_dir=tmp_path)
    assert all(m.split(" ")[0] == "graph" for m in modes.values()), modes
    cannot = {p.name: p.read_text() for p in tmp_path.rglob("*.cannot")}
    assert not cannot and len(list(tmp_path.rglob("*.bin"))) >= 2, cannot
    _, plain = _run(cuda_engine, face_frame, True, 6)
    assert (compiled != face_frame.frame_bgr).any()
    diff = np.abs(compiled.astype(int) - plain.astype(int))
    assert diff.mean() < 0.05 and (diff > 3).mean() < 1e-3, (diff.mean(), (diff > 3).mean())


def test_no_allocation_per_tick_after_warmup(cuda_engine: Any, face_frame: FaceFrame) -> None:
    program = make_program(cuda_engine, device="cuda")
    buffers = FrameBuffers(HEIGHT, WIDTH, 4, pinned=True)
    rows = _rows(face_frame)
    with GpuScheduler(program, SlotShape(1, HEIGHT, WIDTH, 1, program.latent_dim),
                      "cuda") as sched:
        sched.warmup()

        def tick(k: int) -> None:
            if sched.ring_full:
                sched.collect()
            sched.submit([buffers.inputs[k % 4]], [buffers.outputs[k % 4]], rows)

        for k in range(4):  # every slot has run once
            tick(k)
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        for k in range(20):
            tick(k)
        while sched.in_flight:
            sched.collect()
        after = torch.cuda.memory_stats()["allocation.all.allocated"]
    assert after == before, f"{after - before} device allocations in 20 ticks"


def _stage_on(device: str, inswapper_dyn_path: Path, face_frame: FaceFrame, frames: int,
              **windows: int) -> tuple[np.ndarray, Any]:
    """The last of ``frames`` frames of the face through a one-stream GPU stage on
    ``device`` (at most ``capacity`` in flight, as the runtime keeps them), and its hub
    (checked: captured, not eager, on CUDA)."""
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.hub import GpuSwapHub
    from livecam.gpupipe.stage import GpuSwapStage
    from livecam.swap.inswapper import read_emap
    from tests.gpupipe.test_stage import embedding_table, faces_of, packet

    state = RuntimeState(active_identity="alice")
    engine = TorchEngine(inswapper_dyn_path, device=device, precision="fp32", cuda_graphs=False)
    hub = GpuSwapHub(engine, emap=lambda: read_emap(inswapper_dyn_path),
                     source_embedding=embedding_table(("alice",), []), n_streams=1,
                     max_faces=2, slots=3, **windows)
    with GpuSwapStage(hub) as stage:
        stage.prepare(WIDTH, HEIGHT)
        if device == "cuda":
            assert all(m.split(" ")[0] in ("graph", "segmented")
                       for m in hub.graph_modes.values()), hub.graph_modes
        for k in range(frames):
            stage.submit(packet(k, face_frame.frame_bgr, faces_of(face_frame), state))
        got = [stage.collect(60.0) for _ in range(frames)]
        assert all(p is not None for p in got)
    return got[-1].image_bgr, hub  # type: ignore[union-attr]


def test_cuda_stage_matches_the_cpu_stage(inswapper_dyn_path: Path,
                                          face_frame: FaceFrame) -> None:
    outs = {device: _stage_on(device, inswapper_dyn_path, face_frame, 3, window_px=320)[0]
            for device in ("cuda", "cpu")}
    diff = np.abs(outs["cuda"].astype(int) - outs["cpu"].astype(int))
    assert (outs["cpu"] != face_frame.frame_bgr).any() and diff.mean() < 0.2


def test_graphs_hold_boost_enhancer_and_hands(cuda_engine: Any, face_frame: FaceFrame,
                                              tmp_path: Path) -> None:
    """Pixel boost 256, a (batch-1) restorer and a hand mask inside the captured program:
    captured (not eager) on every slot, the same frame as eager, no allocation per tick, and
    the hand's pixels are the frame's own."""
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.build import EnhancerOptions, build_program
    from tests.helpers.standins import build_enhancer

    restorer = TorchEngine(build_enhancer(tmp_path / "gpen_bfr_256.onnx", size_px=256),
                           device="cuda", precision="fp16", cuda_graphs=False)
    restorer.open()
    # a hand-shaped stand-in mask over the mouth: fully in front inside, soft at its edge
    mouth = face_frame.kps[0, 3:5].mean(axis=0)
    alpha = np.zeros((60, 90), np.float32)
    alpha[10:50, 10:80] = 1.0
    alpha[5:10, 5:85] = 0.5
    box = (int(mouth[1]) - 30, int(mouth[0]) - 45, alpha)
    outs, allocations = {}, 0
    for use_graphs in (True, False):
        program = build_program(cuda_engine, device="cuda", window_px=320, pixel_boost_px=256,
                                enhancer_engine=restorer,
                                enhancer=EnhancerOptions(256, "arcface_128", blend=0.8),
                                hands=True)
        shape = SlotShape(1, HEIGHT, WIDTH, 1, program.latent_dim, hands=True)
        buffers = FrameBuffers(HEIGHT, WIDTH, 4, pinned=True)
        for b in buffers.inputs:
            b.numpy()[:] = face_frame.frame_bgr
        with GpuScheduler(program, shape, "cuda", use_graphs=use_graphs) as sched:
            modes = sched.warmup()
            if use_graphs:
                assert all(m.split(" ")[0] in ("graph", "segmented") for m in modes.values()), \
                    modes
            for k in range(12):
                if k == 6:
                    torch.cuda.synchronize()
                    before = torch.cuda.memory_stats()["allocation.all.allocated"]
                if sched.ring_full:
                    sched.collect()
                sched.submit([buffers.inputs[k % 4]], [buffers.outputs[k % 4]],
                             _rows(face_frame), hands=[box])
            while sched.in_flight:
                sched.collect()
            if use_graphs:
                allocations = torch.cuda.memory_stats()["allocation.all.allocated"] - before
        outs[use_graphs] = buffers.outputs[11 % 4].numpy().copy()
    frame = face_frame.frame_bgr
    y0, x0 = box[0], box[1]
    inside = outs[True][y0 + 10:y0 + 50, x0 + 10:x0 + 80]
    assert (inside == frame[y0 + 10:y0 + 50, x0 + 10:x0 + 80]).all()
    assert (outs[True] != frame).any(axis=-1).mean() > 0.03
    diff = np.abs(outs[True].astype(int) - outs[False].astype(int))
    assert diff.max() <= 3 and diff.mean() < 0.02
    assert allocations == 0, f"{allocations} device allocations in 6 ticks"


def test_cuda_graphs_of_both_paste_windows_match_the_cpu(inswapper_dyn_path: Path,
                                                         face_frame: FaceFrame) -> None:
    """Graphs are captured for both windows; a face too big for the small one comes out of
    the large one's graph as on the CPU, and a tick of it uses the large window."""
    outs = {}
    for device in ("cuda", "cpu"):
        outs[device], hub = _stage_on(device, inswapper_dyn_path, face_frame, 1,
                                      window_px=96, window_large_px=160)
        if device == "cuda":
            assert {k.split("/")[-1] for k in hub.graph_modes} == {"96px", "160px"}
        assert list(hub.window_per_tick) == [160]
    diff = np.abs(outs["cuda"].astype(int) - outs["cpu"].astype(int))
    assert (outs["cpu"] != face_frame.frame_bgr).any() and diff.mean() < 0.2

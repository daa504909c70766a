"""The swap program with its parts around the generator compiled (``advanced.gpu.compile_paste``):
the same frames as the program as written, each shape compiled once and logged, and the setting
reaching the hub that ``livecam run`` builds only where it pays (CUDA). Compiled here on the
CPU (Inductor's C++ code: the same tracing and cache path as on CUDA, slower to compile); the
CUDA check, compiled parts captured in the pipeline's graphs, is
``tests/gpupipe/test_cuda.py``'s, run on the H200."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.config import load_config
from livecam.gpupipe.build import build_program
from livecam.gpupipe.factory import swap_compile_dir
from livecam.gpupipe.scheduler import GpuScheduler, TickRows
from livecam.gpupipe.slots import FrameBuffers, HandBox, SlotShape
from livecam.gpupipe.swap.keep import loop_rows_batch
from tests.gpupipe.conftest import HEIGHT, WIDTH, FaceFrame


def _tick_rows(face: FaceFrame) -> TickRows:
    keep_xy, keep_soft = loop_rows_batch(face.landmarks_xy, eyes=True, mouth=True,
                                         mouth_size=1.4)
    return TickRows(frame_index=np.zeros(1, np.int64), kps=face.kps.astype(np.float32),
                    latents=face.latents[:1], valid=np.ones(1, bool), keep_xy=keep_xy,
                    keep_soft=keep_soft)


def _hand(face: FaceFrame) -> HandBox:
    """A soft hand over the chin: 255 in its middle, fading to its edges."""
    x, y = face.landmarks_xy[0, 152]  # the chin
    ramp = np.minimum(np.arange(40), np.arange(40)[::-1]) / 20.0
    alpha = np.clip(np.minimum.outer(ramp, np.minimum(np.arange(80), np.arange(80)[::-1])
                                     / 20.0), 0, 1)
    return int(y) - 20, int(x) - 40, np.rint(alpha * 255).astype(np.uint8)


def _swap(engine: Any, face: FaceFrame, compile_dir: Path | None, *,
          boost_and_hands: bool = False, window_px: int = 320) -> np.ndarray:
    program = build_program(engine, device="cpu", window_px=window_px,
                            compile_dir=compile_dir, hands=boost_and_hands,
                            pixel_boost_px=256 if boost_and_hands else None)
    shape = SlotShape(1, HEIGHT, WIDTH, 2, program.latent_dim, hands=boost_and_hands)
    buffers = FrameBuffers(HEIGHT, WIDTH, 1, pinned=False)
    buffers.inputs[0].numpy()[:] = face.frame_bgr
    hands = [_hand(face)] if boost_and_hands else None
    with GpuScheduler(program, shape, "cpu") as sched:
        for _ in range(2):  # the second tick runs the code the first compiled
            sched.submit(buffers.inputs, buffers.outputs, _tick_rows(face), hands=hands)
            assert sched.collect().fits.all()
    return buffers.outputs[0].numpy().copy()


@pytest.mark.slow
@pytest.mark.parametrize("boost_and_hands", [False, True], ids=["kept eyes and mouth",
                                                                "and pixel boost, a hand"])
def test_the_compiled_program_pastes_what_the_plain_one_pastes(
        cpu_engine: Any, face_frame: FaceFrame, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, boost_and_hands: bool) -> None:
    plain = _swap(cpu_engine, face_frame, None, boost_and_hands=boost_and_hands)
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
        compiled = _swap(cpu_engine, face_frame, tmp_path, boost_and_hands=boost_and_hands)
    changed = (plain != face_frame.frame_bgr).any(axis=-1)
    # a face was swapped inside its outline (2.4 % of this frame), eyes and mouth kept
    assert changed.mean() > 0.015
    # the compiled alignment sums in another order (matrices within 1e-4), so a sample may
    # land on the next 1/32 px; a face misplaced or not pasted differs on most of its pixels
    diff = np.abs(compiled.astype(np.int16) - plain.astype(np.int16))
    assert diff.mean() < 0.05 and (diff > 3).mean() < 1e-3, (diff.mean(), (diff > 3).mean())
    compiled_lines = [r.getMessage() for r in caplog.records
                      if r.getMessage().startswith("compiled the swap's")]
    # one bucket (1 face), one window: each part compiled once, for both ticks
    assert len(compiled_lines) == 2, compiled_lines
    assert any("paste-back" in line for line in compiled_lines)
    assert any(tmp_path.iterdir())  # its code went where the engine cache points


def test_livecam_run_compiles_the_paste_only_on_cuda(tmp_path: Path) -> None:
    config = load_config(None, [f"advanced.engine.cache_dir={tmp_path}"])
    assert swap_compile_dir(config, "cuda") == swap_compile_dir(config, "cuda:0")
    assert swap_compile_dir(config, "cuda") is not None
    assert str(swap_compile_dir(config, "cuda")).startswith(str(tmp_path))
    assert swap_compile_dir(config, "cpu") is None  # the CPU runs of the GPU swap: checks
    off = load_config(None, [f"advanced.engine.cache_dir={tmp_path}",
                             "advanced.gpu.compile_paste=false"])
    assert swap_compile_dir(off, "cuda") is None


@pytest.mark.slow
def test_a_paste_that_cannot_compile_runs_as_written_and_names_its_setting(
        cpu_engine: Any, face_frame: FaceFrame, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A broken compiler (Inductor's C++ compiler named as a file that does not exist) leaves
    the swap running uncompiled, the same frames, and the warning names the setting that
    stops the trying (advanced.gpu.compile_paste, not the face networks'
    advanced.gpu.compile_networks)."""
    import torch._inductor.config as inductor_config

    # a window no other test compiles: code compiled earlier in this process would be found
    # without the compiler
    plain = _swap(cpu_engine, face_frame, None, window_px=288)
    with inductor_config.patch({"cpp.cxx": ("/nonexistent/g++",)}), \
            caplog.at_level(logging.WARNING, logger="livecam.gpupipe.networks.compiled"):
        fallback = _swap(cpu_engine, face_frame, tmp_path, window_px=288)
    assert np.array_equal(fallback, plain)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # the two parts, each once
    assert all("advanced.gpu.compile_paste: false" in w for w in warnings), warnings



@pytest.mark.slow
def test_a_rebuilt_program_calls_the_code_compiled_for_the_first(
        cpu_engine: Any, face_frame: FaceFrame, tmp_path: Path) -> None:
    """A config reload (or another set of streams) builds a new swap program with the same
    settings: it calls the code compiled for the first and traces nothing on the live path.
    A guard, not a fix: it passed when written (dynamo guards the parts' bound swapper by its
    settings, not by identity; the counter below does grow by 2 on a first compile)."""
    from torch._dynamo.utils import counters

    first = _swap(cpu_engine, face_frame, tmp_path)
    traced = counters["stats"]["unique_graphs"]
    again = _swap(cpu_engine, face_frame, tmp_path)
    assert np.array_equal(again, first)
    assert counters["stats"]["unique_graphs"] == traced  # nothing traced for the second


@pytest.mark.slow
def test_a_later_start_loads_the_parts_whole_and_pastes_the_same_frame(
        cpu_engine: Any, face_frame: FaceFrame, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts' compiled calls are saved whole (livecam.gpupipe.networks.precompiled): a new
    program on the same cache loads them, traces nothing, and pastes the same frame. (With
    the process's loaded calls emptied, a new program takes the path a new process takes:
    it finds the files.)"""
    from torch._dynamo.utils import counters

    from livecam.gpupipe.networks import precompiled

    first = _swap(cpu_engine, face_frame, tmp_path, window_px=304)
    assert len(list((tmp_path / "precompiled").glob("*.bin"))) == 2
    monkeypatch.setattr(precompiled, "_LOADED", {})
    traced = counters["stats"]["unique_graphs"]
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
        again = _swap(cpu_engine, face_frame, tmp_path, window_px=304)
    assert np.array_equal(again, first)
    loaded = [r.getMessage() for r in caplog.records if "loaded whole" in r.getMessage()]
    assert len(loaded) == 2, caplog.text
    assert counters["stats"]["unique_graphs"] == traced


def _rows_times(rows: TickRows, n: int) -> TickRows:
    """``rows``' one face ``n`` times (each a real face: what a tick pads a bucket with)."""
    def times(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.repeat(a, n, axis=0)

    return TickRows(frame_index=times(rows.frame_index), kps=times(rows.kps),  # type: ignore[arg-type]
                    latents=times(rows.latents), valid=times(rows.valid),  # type: ignore[arg-type]
                    keep_xy=times(rows.keep_xy), keep_soft=times(rows.keep_soft))


@pytest.mark.slow
def test_with_the_face_count_dynamic_two_and_four_faces_run_one_compiled_alignment(
        cpu_engine: Any, face_frame: FaceFrame, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """``advanced.gpu.compile_dynamic_batches``: the real alignment, compiled once for two
    faces, serves 4 too (issue 41: one compile a bucket made the build too long); the
    paste-back, whose blend loops over the faces, compiles per bucket; both paste what the
    program as written pastes."""
    def run(compile_dir: Path | None) -> list[np.ndarray]:
        program = build_program(cpu_engine, device="cpu", window_px=320,
                                compile_dir=compile_dir, dynamic_faces=True)
        shape = SlotShape(1, HEIGHT, WIDTH, 4, program.latent_dim)
        buffers = FrameBuffers(HEIGHT, WIDTH, 1, pinned=False)
        out = []
        with GpuScheduler(program, shape, "cpu") as sched:
            for n in (2, 4, 3):
                buffers.inputs[0].numpy()[:] = face_frame.frame_bgr
                sched.submit(buffers.inputs, buffers.outputs,
                             _rows_times(_tick_rows(face_frame), n))
                assert sched.collect().fits.all()
                out.append(buffers.outputs[0].numpy().copy())
        return out

    plain = run(None)
    with caplog.at_level(logging.INFO, logger="livecam.gpupipe.networks.compiled"):
        compiled = run(tmp_path)
    for got, want in zip(compiled, plain, strict=True):
        assert (want != face_frame.frame_bgr).any(axis=-1).mean() > 0.015  # swapped
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
        assert diff.mean() < 0.05 and (diff > 3).mean() < 1e-3, (diff.mean(), (diff > 3).mean())
    firsts = [r.getMessage() for r in caplog.records
              if r.getMessage().startswith("compiled the swap's")]
    # the alignment once for 2, 4 (and 3, padded to 4) faces; the paste-back for 2 and 4
    assert sum("alignment" in line for line in firsts) == 1, firsts
    assert sum("paste-back" in line for line in firsts) == 2, firsts

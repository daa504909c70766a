"""Paste windows: a face too big for ``advanced.gpu.paste_window_px`` (a streamer close to the
camera) is swapped in the larger window, as the CPU path swaps it, and a tick of small faces keeps
the small, cheaper window.

Before, the GPU path had one window (640 px by default): every face whose crop footprint did
not fit it, about 400 px wide and more at 1080p, was covered instead of swapped. Real photo
and landmarks, stand-in generator (the real one is a download), on the CPU (the same code as
on CUDA, without graphs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from livecam.app import gpu_sections
from livecam.core.types import RuntimeState
from livecam.gpupipe.stage import GpuSwapStage
from livecam.gpupipe.swap.align import align_matrices
from livecam.gpupipe.swap.paste import footprint_px, mask_fits_window, window_for
from livecam.swap.align import template_xy
from tests.gpupipe.conftest import FaceFrame, make_program
from tests.gpupipe.test_stage import collect_all, embedding_table, faces_of, make_hub, packet


def _random_faces(n: int, seed: int) -> np.ndarray:
    """(n, 5, 2) keypoints: the template turned, scaled and moved at random."""
    rng = np.random.default_rng(seed)
    base = template_xy("arcface_128", 128) - 64.0
    angle = rng.uniform(-np.pi, np.pi, n)
    scale = rng.uniform(0.3, 6.0, n)
    rot = np.stack([np.stack([np.cos(angle), -np.sin(angle)], -1),
                    np.stack([np.sin(angle), np.cos(angle)], -1)], -2) * scale[:, None, None]
    kps = base[None] @ rot.transpose(0, 2, 1) + rng.uniform(0, 1000, (n, 1, 2))
    return (kps + rng.normal(0, 0.02, kps.shape) * scale[:, None, None]).astype(np.float32)


def test_the_host_footprint_is_the_devices_check() -> None:
    """The window the host picks from the keypoints is the one the device's own check
    (``mask_fits_window`` on the aligned matrix) accepts, to a pixel, for any turn of the
    head and any size."""
    kps = _random_faces(300, seed=3)
    template = template_xy("arcface_128", 128)
    need = footprint_px(kps, template, 128)
    matrices = align_matrices(torch.from_numpy(kps), torch.from_numpy(template))
    for window, expect in ((np.ceil(need) + 1, True), (np.floor(need) - 1, False)):
        fits = [bool(mask_fits_window(matrices[i:i + 1], 128, int(w))[0])
                for i, w in enumerate(window)]
        assert all(f == expect for f in fits), np.flatnonzero(np.array(fits) != expect)
    # keypoints that are not finite give no size (then the largest window, see below)
    assert np.isnan(footprint_px(np.full((1, 5, 2), np.nan, np.float32), template, 128)[0])


def test_window_for_takes_the_smallest_that_holds_every_face() -> None:
    windows = (320, 640, 1088)
    assert window_for(np.array([100.0, 300.0]), windows, (1080, 1920)) == 320
    assert window_for(np.array([100.0, 319.0]), windows, (1080, 1920)) == 640  # margin
    assert window_for(np.array([700.0]), windows, (1080, 1920)) == 1088
    assert window_for(np.array([1079.0]), windows, (1080, 1920)) == 1088  # none holds it
    assert window_for(np.array([700.0]), windows, (720, 1280)) == 1088  # cut to 720: holds
    assert window_for(np.array([]), windows, (1080, 1920)) == 320
    # keypoints that are not finite: the largest window (the device's check then covers it)
    assert window_for(np.array([100.0, np.nan]), windows, (1080, 1920)) == 1088


@pytest.mark.slow
def test_a_face_too_big_for_the_window_is_swapped_in_the_large_one(
        inswapper_dyn_path: Path, face_frame: FaceFrame) -> None:
    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    need = float(footprint_px(face_frame.kps, template_xy("arcface_128", 128), 128)[0])
    assert 100 < need < 150, need  # the photo's face: too big for 96, fits 160
    embed = embedding_table(("alice",), [])
    state = RuntimeState(active_identity="alice")

    def swap(**windows: int) -> tuple[np.ndarray, list[int]]:
        hub = make_hub(inswapper_dyn_path, embed, **windows)
        with GpuSwapStage(hub) as stage:
            stage.submit(packet(0, image, faces, state))
            (out,) = collect_all(stage, 1)
        return out.image_bgr, list(hub.window_per_tick)

    small_only, used_small = swap(window_px=96)
    both, used_both = swap(window_px=96, window_large_px=160)
    large_only, _ = swap(window_px=160)
    assert used_small == [96] and used_both == [160]
    np.testing.assert_array_equal(both, large_only)  # swapped, as with one large window
    x0, y0, x1, y1 = (int(v) for v in faces.boxes_xyxy[0])
    face = (slice(y0, y1), slice(x0, x1))
    # with the small window alone the face is covered: not the swap
    assert np.abs(small_only[face].astype(int) - large_only[face].astype(int)).mean() > 3
    assert (both != image).any(axis=-1).mean() > 0.015  # the face's outline: 2.4 %


@pytest.mark.slow
def test_small_faces_keep_the_small_window(inswapper_dyn_path: Path,
                                           face_frame: FaceFrame) -> None:
    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), []), window_large_px=640)
    state = RuntimeState(active_identity="alice")
    with GpuSwapStage(hub) as stage:
        stage.submit(packet(0, face_frame.frame_bgr, faces_of(face_frame), state))
        collect_all(stage, 1)
    assert hub.windows_px == (320, 640) and list(hub.window_per_tick) == [320]


def test_a_window_the_frame_cuts_to_a_smaller_ones_size_is_dropped(cpu_engine: Any) -> None:
    """A large window adds nothing to a frame whose smaller side the usual window already
    covers: no second set of graphs (and start time) for it."""
    from livecam.gpupipe.scheduler import GpuScheduler
    from livecam.gpupipe.slots import SlotShape

    program = make_program(cpu_engine)

    def windows(height: int, width: int, *sizes: int) -> tuple[int, ...]:
        shape = SlotShape(1, height, width, 2, program.latent_dim)
        return GpuScheduler(program, shape, "cpu", windows_px=sizes).windows_px

    assert windows(1080, 1920, 640, 1088) == (640, 1088)
    assert windows(720, 1280, 1088, 640) == (640, 1088)  # 640 and 720 once cut
    assert windows(480, 640, 640, 1088) == (640,)  # both 480 once cut
    assert windows(360, 480, 320, 640, 1088) == (320, 640)
    assert windows(1080, 1920) == (320,)  # the swapper's own window


def test_livecam_runs_factory_gives_the_hub_both_windows(tmp_path: Path) -> None:
    """``advanced.gpu.paste_window_large_px`` reaches the hub ``livecam run`` builds (nothing
    opened); its default is larger than the usual window, and 0 turns it off."""
    from livecam.app import SharedStages
    from livecam.config import load_config
    from livecam.gpupipe.factory import build_gpu_stages
    from tests.gpupipe.test_stage import _NoIdentities

    def hub_windows(*overrides: str) -> tuple[int, ...]:
        config = load_config(None, ["swap.mode=neural", f"advanced.models.dir={tmp_path}",
                                    "advanced.engine.device=cpu", "advanced.gpu.pipeline=always",
                                    *overrides])
        *_, stage = build_gpu_stages(gpu_sections(config), identities=_NoIdentities(),
                                     shared=SharedStages())
        return stage.hub.windows_px  # type: ignore[attr-defined, no-any-return]

    assert hub_windows() == (640, 1088)
    assert hub_windows("advanced.gpu.paste_window_large_px=0") == (640,)
    assert hub_windows("advanced.gpu.paste_window_px=320",
                       "advanced.gpu.paste_window_large_px=720") == (320, 720)
    assert hub_windows("advanced.gpu.paste_window_large_px=512") == (640,)  # not larger: none


@pytest.mark.slow
def test_a_face_no_window_holds_is_covered_and_said_once(
        inswapper_dyn_path: Path, face_frame: FaceFrame,
        caplog: pytest.LogCaptureFixture) -> None:
    """Before, such a face was covered without a word: the user could not tell why."""
    import logging

    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), []), window_px=96)
    state = RuntimeState(active_identity="alice")
    with GpuSwapStage(hub) as stage, caplog.at_level(logging.WARNING, "livecam.gpupipe.stage"):
        for k in range(3):
            stage.submit(packet(k, face_frame.frame_bgr, faces_of(face_frame), state))
        collect_all(stage, 3)
    assert stage.faces_too_big == 3
    lines = [r.getMessage() for r in caplog.records if "paste window" in r.getMessage()]
    assert len(lines) == 1 and "advanced.gpu.paste_window_large_px" in lines[0], lines

"""The shapes a GPU start compiles and captures do not grow with the number of streams
(:mod:`livecam.gpupipe.shapes`): the plan, and the hub ``livecam run`` builds, for 1, 4 and 16
streams. On the CPU (the hub's sizes are the same objects on CUDA; what is compiled there is
called with the slots' tensors sized here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from livecam.app import gpu_sections
from livecam.config import Config, load_config
from livecam.gpupipe.shapes import CompiledShape, ShapePlan, plan_start
from tests.helpers.standins import install_standin_models

SIZE = (1920, 1080)


def _plan(config: Config) -> ShapePlan:
    return plan_start(config, width_px=SIZE[0], height_px=SIZE[1])


def _parts(shapes: tuple[CompiledShape, ...], *names: str) -> set[CompiledShape]:
    return {s for s in shapes if s.part in names}


def test_a_start_of_1_4_or_16_streams_asks_for_the_same_compiled_shapes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan takes no number of streams: one stream and many run the same face networks
    and swap. What ``livecam run`` builds for 1, 4 and 16 streams is sized by it: the
    networks' stacked frames and detector calls (the swap's: the next test)."""
    from livecam.app import SharedStages
    from livecam.gpupipe import factory

    config = load_config(None, ["swap.mode=neural", "analysis.max_faces=4",
                                "advanced.engine.torch_mode=compiled",
                                "advanced.engine.build_if_missing=true"])
    plan = _plan(config)
    shapes = plan.compiled_shapes()
    # O(buckets): the alignment for one face and for 2+ (any count up to 16: one compile),
    # the paste-back for faces 1..16 (5 buckets), x 2 windows, 3 generator batches, the
    # detector for one frame and 2+ (1..16), the mesh for one region and 2+ (1..64); before, 16
    # streams of 4 faces asked for faces up to 64 and frames (16, H, W, 3), 4 streams for
    # (4, H, W, 3), and one stream for a detector and mesh of its own: sets that grew with N
    # and the tile search's detector: one batch of a 1080p frame's 28 tiles
    assert len(shapes) == (2 + 5) * 2 + 3 + 2 + 2 + 1
    assert _parts(shapes, "tile detector") == {
        CompiledShape("tile detector", ((1, 1080, 1920, 3), 28))}
    frames = {s.inputs[0] for s in shapes if s.part.startswith("swap")}
    assert frames == {(16, 1080, 1920, 3)}
    assert {s.inputs[1] for s in _parts(shapes, "swap alignment")} == {1, "2+"}
    assert {s.inputs[1] for s in _parts(shapes, "swap paste-back")} == {1, 2, 4, 8, 16}
    assert "swap alignment (16,1080,1920,3) 2+ faces 1088 px" in {s.describe() for s in shapes}
    assert {s.inputs[0] for s in _parts(shapes, "face detector", "face mesh")} == {
        (64, 1080, 1920, 3)}
    # the networks livecam run builds (for CUDA; nothing opened) have the plan's sizes
    monkeypatch.setattr(factory, "networks_compile_dir", lambda config: None)
    for n in (1, 4, 16):
        nets, _ = factory.follower_networks(config, "cuda:0", shared=SharedStages(n))
        assert nets.shared.stack_frames == plan.stack_frames == 64
        assert nets.shared.frames_per_call == plan.frames_per_call
        assert nets.shared.max_mesh == plan.mesh_max


def test_the_swaps_parts_compile_per_bucket_with_the_dynamic_face_count_off() -> None:
    from livecam.gpupipe.prepared import compile_estimate_s

    sets = ["swap.mode=neural", "analysis.max_faces=4"]
    dynamic = _plan(load_config(None, sets)).compiled_shapes()
    static = _plan(load_config(None, [*sets, "advanced.gpu.compile_dynamic_batches=false"])
                   ).compiled_shapes()
    swap = ("swap alignment", "swap paste-back")
    assert len(_parts(dynamic, *swap)) == (2 + 5) * 2  # alignment 1 and 2+, two windows
    assert len(_parts(static, *swap)) == 5 * 2 * 2  # 1, 2, 4, 8, 16: the lead's 20 at 1080p
    assert {s.inputs[1] for s in _parts(static, *swap)} == {1, 2, 4, 8, 16}
    assert {s.inputs[1] for s in _parts(dynamic, "face detector")} == {1, "2+"}
    assert {s.inputs[1] for s in _parts(static, "face detector")} == {1, 2, 4, 8, 16}
    assert {s.inputs[1] for s in _parts(dynamic, "face mesh")} == {1, "2+"}
    assert {s.inputs[1] for s in _parts(static, "face mesh")} == {1, 2, 4, 8, 16, 32, 64}
    # the estimate (not measured: a 2+ compile is taken as 1.5 static ones) still drops
    assert compile_estimate_s(dynamic) < compile_estimate_s(static)


def test_the_call_sizes_follow_the_config_not_the_streams() -> None:
    small = load_config(None, ["swap.mode=neural", "advanced.pipeline.max_streams=3",
                               "advanced.gpu.max_faces_per_call=2", "analysis.max_faces=4"])
    plan = _plan(small)
    assert plan.frames_per_call == 4  # the bucket that holds max_streams, under the cap
    assert plan.faces_per_call == 4  # never fewer than one stream's max_faces
    assert plan.face_buckets == (0, 1, 2, 4)
    assert plan.stack_frames == 3
    cpu = plan_start(small, width_px=640, height_px=480, device="cpu")
    assert not cpu.swap_compiled and not cpu.networks_compiled
    assert cpu.windows_px == (640,)  # 1088 cut to a 480-line frame adds nothing


def test_the_hub_livecam_run_builds_is_sized_by_the_plan_for_any_number_of_streams(
        tmp_path: Path) -> None:
    from livecam.gpupipe.factory import build_hub

    models_dir, manifests_dir = install_standin_models(tmp_path)
    config = load_config(None, [
        "swap.mode=neural", f"advanced.models.dir={models_dir}",
        f"advanced.models.manifests_dir={manifests_dir}",
        "advanced.engine.device=cpu", f"advanced.engine.cache_dir={tmp_path / 'cache'}",
        "advanced.gpu.pipeline=always",
        "analysis.max_faces=2", "advanced.engine.torch_mode=cuda_graphs"])
    width, height = 320, 240
    seen = set()
    for n in (1, 4, 16):
        plan = plan_start(config, width_px=width, height_px=height)
        hub = build_hub(gpu_sections(config), _NoIdentities(), n_streams=n)
        hub.acquire()
        try:
            hub.prepare(width, height)
            sched = hub._rings[(height, width)]
            assert sched.shape.n_frames == plan.frames_per_call
            assert sched.shape.max_faces == plan.faces_per_call
            assert sched.buckets == plan.face_buckets
            assert sched.windows_px == plan.windows_px
            assert sched.ring is not None
            seen.add((tuple(sched.ring.slots[0].frames_dev.shape), sched.buckets,
                      sched.windows_px, len(sched.ring)))
        finally:
            hub.release()
    assert len(seen) == 1, seen


class _NoIdentities:
    def load(self, name: str) -> object:
        from livecam.core.errors import IdentityError

        raise IdentityError(f"no identity {name!r}")

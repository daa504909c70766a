"""The GPU memory plan (:mod:`livecam.gpupipe.memory`): what N streams need, and a start that
the limit cannot hold refused with one line before anything is compiled. On the CPU: the
limit is ``advanced.gpu.memory_limit_gb`` (there is no card to read), the face networks are the
torch ports compiled on the CPU through the seam the engines-build test uses (this machine has no
CUDA GPU), and the swap's compiled parts are asked for on the CPU too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.config import load_config
from livecam.core.errors import ConfigError
from livecam.gpupipe import memory
from livecam.gpupipe.shapes import plan_start
from tests.gpupipe.test_engines_build import _sets, _torch_networks_on_cpu


def _need(n: int, **sets: str) -> memory.MemoryNeed:
    config = load_config(None, ["swap.mode=neural", *(f"{k}={v}" for k, v in sets.items())])
    plan = plan_start(config, width_px=1920, height_px=1080)
    return memory.estimate(plan, n_streams=n, keep_frames=config.gpu.slots + 2,
                           model_bytes=554 << 20)


def test_only_the_streams_kept_frames_grow_with_the_streams() -> None:
    one, sixteen, many = _need(2), _need(16), _need(32)
    parts = [dict(n.parts) for n in (one, sixteen, many)]
    for name in parts[0]:
        if name != "face networks' frames":
            assert parts[0][name] == parts[1][name] == parts[2][name], name
    # each stream keeps advanced.gpu.slots + 2 frames of 1080p for the swap: 5 x 6.2 MB
    grown = parts[2]["face networks' frames"] - parts[1]["face networks' frames"]
    assert grown == 16 * 5 * 1920 * 1080 * 3
    assert many.total_bytes < 40 * memory.GB  # the goal at 32 streams, by this model
    # uncompiled, the paste-back's graphs hold far more: the plan says so
    assert _need(32, **{"advanced.gpu.compile_paste": "false"}).total_bytes > many.total_bytes


def test_the_plan_counts_each_streams_place_for_every_edge_strip() -> None:
    """A frame's edge strips are built into a place each, for every stream the stack holds
    (1080p: eight 1080x1080 pictures, 28 MB a stream); the plan counted one."""
    config = load_config(None, ["swap.mode=neural"])
    plan = plan_start(config, width_px=1920, height_px=1080)
    frames = dict(_need(2).parts)["face networks' frames"]
    strips = plan.stack_frames * 8 * 1080 * 1080 * 3
    assert frames >= plan.stack_frames * 1920 * 1080 * 3 + strips


def test_the_limit_is_the_setting_or_the_card_less_headroom() -> None:
    assert memory.limit_bytes(2.0, 4.0, "cpu") == 2 * memory.GB
    assert memory.limit_bytes(0.0, 4.0, "cpu") is None  # no card known: no limit
    need = _need(16)
    plan = plan_start(load_config(None, []), width_px=1920, height_px=1080)
    memory.check_fits(need, need.total_bytes, n_streams=16, plan=plan, limit_source="x")
    with pytest.raises(ConfigError, match=r"more than the 1 GB of advanced.gpu.memory_limit_gb"):
        memory.check_fits(need, memory.GB, n_streams=16, plan=plan,
                          limit_source="advanced.gpu.memory_limit_gb")


@pytest.mark.slow
def test_a_start_the_limit_cannot_hold_is_refused_in_one_line_before_anything_compiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, astronaut_bgr: np.ndarray) -> None:
    from livecam.app import build_streams
    from livecam.core.types import RuntimeState
    from livecam.gpupipe import factory
    from livecam.gpupipe.networks import compiled
    from livecam.identity.model import IdentityCollection
    from tests.gpupipe.stage_support import identity_from_photo

    compiles: list[Any] = []
    real_first_call = compiled.CompiledNetwork._first_call

    def first_call(self: Any, *args: Any) -> Any:  # the compile seam: record, then compile
        compiles.append(self.name)
        return real_first_call(self, *args)

    monkeypatch.setattr(compiled.CompiledNetwork, "_first_call", first_call)
    monkeypatch.setattr(factory, "follower_networks", _torch_networks_on_cpu)
    monkeypatch.setattr(factory, "swap_compile_dir",
                        lambda config, device: tmp_path / "cache" / "inductor")
    config = load_config(None, [*_sets(tmp_path), "swap.mode=neural",
                                "advanced.gpu.memory_limit_gb=0.05", "control.api=false",
                                "control.hotkeys=false", "advanced.pipeline.status_interval_s=0"])
    identities = IdentityCollection({"astro": identity_from_photo("astro", astronaut_bgr)})
    # `livecam run` with four input/output pairs (build_streams is what it calls)
    streams = build_streams(config, pairs=[("synthetic:320x240", "null")] * 4,
                            identities=identities, max_frames=3,
                            state=RuntimeState(active_identity="astro", identities=("astro",)))
    with pytest.raises(ConfigError) as refused:
        streams.run()
    line = str(refused.value)
    assert "\n" not in line
    assert "4 stream(s) of 320x240 frames need about" in line
    assert "more than the 0.05 GB of advanced.gpu.memory_limit_gb" in line
    assert compiles == []  # nothing was compiled (nor captured) before the refusal

"""Which identity each tracked face gets: the same rule in the classic, neural and GPU stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from livecam.core.types import Frame, Packet, RuntimeState
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.swap.assign import IdentityAssigner
from livecam.swap.inswapper import InswapperModel
from livecam.swap.neural import NeuralSwapStage
from tests.helpers.standins import build_inswapper
from tests.helpers.swap_eval import RealFace


def test_runtime_choice_then_order_of_appearance_then_active() -> None:
    assigner = IdentityAssigner(("bob", "carol"))
    state = RuntimeState(active_identity="alice")
    # tracks get assign[] in the order they first ask, whatever their ids
    assert assigner.identity_for(state, 9) == "bob"
    assert assigner.identity_for(state, 4) == "carol"
    assert assigner.identity_for(state, 12) == "alice"  # more people than names
    assert assigner.identity_for(state, 9) == "bob"  # remembered
    # a runtime per-track choice wins; an untracked face (-1) gets the active identity
    chosen = RuntimeState(active_identity="alice", track_identities=((4, "dave"),))
    assert assigner.identity_for(chosen, 4) == "dave"
    assert assigner.identity_for(state, -1) == "alice"
    # without swap.assign: the runtime choice, else the active identity
    plain = IdentityAssigner()
    assert plain.identity_for(state, 9) == "alice"
    assert plain.identity_for(chosen, 4) == "dave"


def test_neural_stage_follows_swap_assign(tmp_path: Path,
                                          by_label: dict[str, RealFace]) -> None:
    """Two real people: the first to appear gets assign[0], the other the active identity."""
    from livecam.analysis.photo import analyze_photo

    t1_bgr = by_label["t1-0"].image_bgr
    faces = analyze_photo(t1_bgr)[:2]
    faces = faces.with_fields(track_ids=np.array([5, 3], dtype=np.int64))
    packet = Packet(frame=Frame(0, 0, t1_bgr), image_bgr=t1_bgr, faces=faces,
                    state=RuntimeState(active_identity="alice"))
    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    asked: list[str] = []

    def source_embedding(name: str) -> np.ndarray:
        asked.append(name)
        return np.ones(512, np.float32)

    stage = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                           model_path), source_embedding, assign=("bob",))
    with stage:
        stage.process(packet)
    assert asked == ["bob", "alice"]


def test_the_identities_prepared_ahead_start_with_those_in_use() -> None:
    """Stages prepare identities ahead in this order, one at a time (a neural one's embedding
    takes a second or more on a first start): the library's order put the active identity
    behind every name before it, its faces covered until those were ready."""
    assigner = IdentityAssigner(("carol", "alice"))
    state = RuntimeState(active_identity="erin", track_identities=((3, "dave"),),
                         identities=("alice", "bob", "carol", "dave", "erin"))
    assert assigner.wanted(state) == ("erin", "dave", "carol", "alice", "bob")
    assert assigner.wanted(RuntimeState(identities=("a", "b"))) == ("carol", "alice", "a", "b")

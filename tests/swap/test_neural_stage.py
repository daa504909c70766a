"""The neural swap stage: start-up checks and per-frame behaviour on a real photo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.config import load_config
from livecam.core.errors import ModelError
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.swap.cover import FaceCover
from livecam.swap.inswapper import InswapperModel
from livecam.swap.mesh import MeshTopology
from livecam.swap.neural import NeuralSwapStage, build_neural_stage
from tests.helpers.sections import models_of
from tests.helpers.standins import build_inswapper
from tests.swap.held_identity import HeldIdentity


def test_neural_mode_without_models_fails_at_start_naming_fetch(tmp_path: Path) -> None:
    config = load_config(None, ["engine.backend=onnxruntime", "advanced.engine.device=cpu",
                                f"advanced.models.dir={tmp_path}"])
    stage = build_neural_stage(models_of(config), lambda name: None)
    with pytest.raises(ModelError, match=r"livecam models fetch inswapper_128"):
        stage.open()


@pytest.fixture(scope="module")
def astronaut_packet(astronaut_bgr: np.ndarray) -> Packet:
    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(astronaut_bgr)
    assert len(faces) == 1
    faces = faces.with_fields(track_ids=np.array([7], dtype=np.int64))
    return Packet(frame=Frame(0, 0, astronaut_bgr), image_bgr=astronaut_bgr, faces=faces,
                  state=RuntimeState(active_identity="someone"))


def test_stage_swaps_only_the_face(tmp_path: Path, astronaut_packet: Packet) -> None:
    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    embedding = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    asked: list[str] = []

    def source_embedding(name: str) -> np.ndarray:
        asked.append(name)
        return embedding

    stage = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                           model_path), source_embedding)
    with stage:
        out = stage.process(astronaut_packet)
        bypassed = stage.process(astronaut_packet.with_fields(
            state=RuntimeState(active_identity="someone", bypass=True)))
        nobody = stage.process(astronaut_packet.with_fields(state=RuntimeState()))
    assert asked == ["someone"]
    before = astronaut_packet.image_bgr
    assert out.image_bgr is not before and before is astronaut_packet.frame.image_bgr
    changed = (out.image_bgr != before).any(axis=-1)
    x1, y1, x2, y2 = astronaut_packet.faces.boxes_xyxy[0]
    ys, xs = np.nonzero(changed)
    assert changed.sum() > 1000
    # every changed pixel lies near the face box (the mask never leaks over the frame)
    pad = 0.5 * max(x2 - x1, y2 - y1)
    assert xs.min() >= x1 - pad and xs.max() <= x2 + pad
    assert ys.min() >= y1 - pad and ys.max() <= y2 + pad
    assert bypassed.image_bgr is before
    assert nobody.image_bgr is before


def test_the_swap_stays_inside_the_faces_outline(tmp_path: Path, astronaut_packet: Packet,
                                                 topology: MeshTopology) -> None:
    """Before: insightface's whole aligned square was pasted, so whatever lay inside it (hair,
    background, a hand or a board in front of the jaw) was repainted by the generator (a
    *ghost* over an occluder: issue 39). Now nothing changes beyond the face's outline (the
    mesh's face oval, one pixel of rim), as the classic swap and the GPU path paste."""
    import cv2

    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    embedding = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    stage = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                           model_path), lambda name: embedding)
    with stage:
        out = stage.process(astronaut_packet)
    changed = (out.image_bgr != astronaut_packet.image_bgr).any(axis=-1)
    oval = astronaut_packet.faces.landmarks_xy[0][topology.face_oval]
    inside = np.zeros(changed.shape, np.uint8)
    cv2.fillPoly(inside, [np.round(oval).astype(np.int32)], (1,))
    assert changed[inside == 1].mean() > 0.5  # the face is swapped
    inside = cv2.dilate(inside, np.ones((3, 3), np.uint8))
    assert not changed[inside == 0].any(), int(changed[inside == 0].sum())


def test_faces_it_cannot_swap_are_covered_not_sent_as_they_are(
        tmp_path: Path, astronaut_packet: Packet) -> None:
    """Fail closed, neural path: a face analysis withheld, a face whose identity has no
    embedding, and every face of a frame the remote engine did not answer for (before: the
    first two went out as they are, the last through a stop-gap pixelation)."""
    from livecam.core.errors import EngineUnavailableError
    from livecam.core.types import Unswappable, WithheldFaces
    from tests.helpers.leak_judge import LEAK_RESIDUAL, residual

    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    box = astronaut_packet.faces.boxes_xyxy[0]
    before = astronaut_packet.image_bgr

    def covered(out: Packet) -> bool:
        r = residual(before, out.image_bgr, box)
        return r is not None and r > LEAK_RESIDUAL

    class _Down:
        """A remote engine that is down: the seam TritonEngine raises through."""

        def __init__(self, engine: OnnxRuntimeEngine) -> None:
            self.inner = engine
            self.inputs, self.outputs = engine.inputs, engine.outputs

        def open(self) -> None: ...

        def close(self) -> None: ...

        def run(self, feeds: dict) -> dict:
            raise EngineUnavailableError("no answer from the Triton server (test)")

    engine = OnnxRuntimeEngine(model_path, device="cpu")
    stage = NeuralSwapStage(InswapperModel(engine, model_path), lambda name: None)
    with stage:
        assert covered(stage.process(astronaut_packet))  # no embedding for this identity
        withheld = astronaut_packet.with_fields(
            faces=astronaut_packet.faces[[]],
            withheld=WithheldFaces.from_faces(astronaut_packet.faces, Unswappable.PENDING))
        assert covered(stage.process(withheld))
    engine.open()
    down = NeuralSwapStage(InswapperModel(_Down(engine), model_path),
                           lambda name: np.ones(512, np.float32))
    with down:
        assert covered(down.process(astronaut_packet))


def test_a_switch_covers_the_face_rather_than_hold_the_previous_identity(
        tmp_path: Path, astronaut_packet: Packet) -> None:
    """The frame after a switch to an identity with no embedding (yet) shows the cover, not
    the last good swap of the identity switched away from (``hold`` is for a face that
    cannot be swapped, not for the old identity)."""
    from livecam.core.types import Unswappable, WithheldFaces
    from livecam.swap.cover import FaceCover

    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    alice = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    stage = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                           model_path),
                            lambda name: alice if name == "alice" else None,
                            cover=FaceCover(mode="hold", hold_frames=8))
    image = astronaut_packet.image_bgr
    with stage:
        swapped = stage.process(astronaut_packet.with_fields(
            state=RuntimeState(active_identity="alice")))
        switched = stage.process(astronaut_packet.with_fields(
            frame=Frame(1, 0, image), state=RuntimeState(active_identity="bob")))
    assert (swapped.image_bgr != image).any()
    withheld = WithheldFaces.from_faces(astronaut_packet.faces, Unswappable.IDENTITY_MISSING)
    assert (switched.image_bgr == FaceCover(mode="cover").cover(image, withheld, 1)).all()


def _stage(tmp_path: Path, embed: Any, **kw: Any) -> NeuralSwapStage:
    model_path = build_inswapper(tmp_path / "inswapper_128.onnx")
    return NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(model_path, device="cpu"),
                                          model_path), embed, **kw)


def test_an_identity_is_embedded_once_not_on_every_frame(
        tmp_path: Path, astronaut_packet: Packet) -> None:
    """Before, the stage asked for the embedding on every frame, and the product's embedding
    function reads the identity's photos from disk before its cache lookup (PNG and mesh
    files, each face of each frame)."""
    asked: list[str] = []
    embedding = np.random.default_rng(0).standard_normal(512).astype(np.float32)

    def source_embedding(name: str) -> np.ndarray:
        asked.append(name)
        return embedding

    with _stage(tmp_path, source_embedding) as stage:
        outs = [stage.process(astronaut_packet.with_fields(frame=Frame(k, 0, astronaut_packet
                                                                       .image_bgr)))
                for k in range(3)]
    assert asked == ["someone"]
    assert all((out.image_bgr != astronaut_packet.image_bgr).any() for out in outs)


def test_an_identity_that_cannot_be_loaded_is_covered_not_a_stage_error(
        tmp_path: Path, astronaut_packet: Packet) -> None:
    """An identity removed from the library (or a name no identity has) raised out of the
    stage on every frame: each frame became a stage error, logged as one, and the load was
    tried again on every frame. Now its faces are covered as missing, and it is tried again
    after ``missing_log_interval_s``."""
    from livecam.core.errors import IdentityError
    from livecam.core.types import Unswappable, WithheldFaces

    asked: list[str] = []

    def source_embedding(name: str) -> np.ndarray:
        asked.append(name)
        raise IdentityError(f"no identity {name!r}")

    image = astronaut_packet.image_bgr
    with _stage(tmp_path, source_embedding, clock=lambda: 100.0) as stage:
        outs = [stage.process(astronaut_packet) for _ in range(3)]
    assert asked == ["someone"]
    withheld = WithheldFaces.from_faces(astronaut_packet.faces, Unswappable.IDENTITY_MISSING)
    for out in outs:
        assert (out.image_bgr == FaceCover().cover(image, withheld, 0)).all()


def test_a_switch_to_an_identity_being_embedded_covers_the_face_and_does_not_wait(
        tmp_path: Path, astronaut_packet: Packet) -> None:
    """The identities a user can switch to are embedded ahead on a worker thread. Before, the
    first frame after a switch to one never embedded before ran the embedding on the pipeline
    thread (photos read, the recognizer run: a second or more on a first start), and the
    stream's frames waited that long. Now that face is covered until the embedding is ready."""
    from livecam.core.types import Unswappable, WithheldFaces

    table = {n: np.random.default_rng(i).standard_normal(512).astype(np.float32)
             for i, n in enumerate(("alice", "bob"))}
    embed = HeldIdentity(table.__getitem__, "bob")
    names = ("alice", "bob")
    image = astronaut_packet.image_bgr
    alice = astronaut_packet.with_fields(state=RuntimeState(active_identity="alice",
                                                            identities=names))
    bob = astronaut_packet.with_fields(frame=Frame(1, 0, image), state=RuntimeState(
        active_identity="bob", identities=names))
    try:
        with _stage(tmp_path, embed) as stage:
            assert (stage.process(alice).image_bgr != image).any()
            covered = embed.returns_while_held(lambda: stage.process(bob))
            withheld = WithheldFaces.from_faces(astronaut_packet.faces,
                                                Unswappable.IDENTITY_LOADING)
            assert (covered.image_bgr == FaceCover().cover(image, withheld, 1)).all()
            assert stage._embeddings.wait("bob", 60)
            assert (stage.process(bob).image_bgr != covered.image_bgr).any()  # bob's swap
    finally:
        embed.release.set()

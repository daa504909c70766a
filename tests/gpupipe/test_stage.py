"""The GPU swap as ``livecam run`` uses it, on the CPU: one stream's asynchronous stage equals
the CPU neural stage, frames in flight come back in order, several streams share ticks of one
hub without changing each other's frames, a failed tick fails only its frames, and the
factory builds it from installed models.

Real photos and landmarks, stand-in generator and recognizer (the real ones are downloads).
CUDA-only checks are in test_cuda.py, marked ``gpu``.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.app import gpu_pipeline_wanted, gpu_sections
from livecam.config import load_config
from livecam.core.errors import IdentityError, ModelError
from livecam.core.types import Faces, Frame, Packet, RuntimeState
from livecam.gpupipe.factory import build_gpu_stages
from livecam.gpupipe.hub import GpuSwapHub
from livecam.gpupipe.stage import GpuSwapStage
from livecam.swap.cover import FaceCover
from tests.gpupipe.conftest import FaceFrame, assert_same_swap
from tests.swap.held_identity import HeldIdentity


def embedding_table(names: tuple[str, ...], asked: list[str]) -> Any:
    table = {n: np.random.default_rng(i).standard_normal(512).astype(np.float32)
             for i, n in enumerate(names)}

    def source_embedding(name: str) -> np.ndarray:
        asked.append(name)
        if name not in table:
            raise IdentityError(f"no identity {name!r}")
        return table[name]

    return source_embedding


class Generator:
    """The torch engine the hub runs, made on open (as the factory's lazy engine); ``fail_on``
    names calls (counted from 0) that raise, standing in for a device error."""

    def __init__(self, path: Path, fail_on: frozenset[int] = frozenset()) -> None:
        from livecam.engines.torch_engine import TorchEngine

        self.engine = TorchEngine(path, device="cpu", precision="fp32", cuda_graphs=False)
        self.fail_on = fail_on
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def run_torch(self, feeds: Any, stream: Any = None) -> Any:
        self.calls += 1
        if self.calls - 1 in self.fail_on:
            raise RuntimeError("device error")
        return self.engine.run_torch(feeds, stream)


def make_hub(path: Path, embed: Any, *, n_streams: int = 1, **kw: Any) -> GpuSwapHub:
    from livecam.swap.inswapper import read_emap

    generator = kw.pop("generator", None) or Generator(path)
    kw.setdefault("window_px", 320)
    return GpuSwapHub(generator, emap=lambda: read_emap(path), source_embedding=embed,
                      n_streams=n_streams, max_faces=2, slots=3, **kw)


def packet(k: int, image: np.ndarray, faces: Faces, state: RuntimeState) -> Packet:
    return Packet(frame=Frame(k, 0, image), image_bgr=image, faces=faces, state=state)


def faces_of(face_frame: FaceFrame, track_id: int = 1) -> Faces:
    xy = face_frame.landmarks_xy
    return Faces(boxes_xyxy=np.concatenate([xy.min(axis=1), xy.max(axis=1)], axis=1),
                 scores=np.ones(1, np.float32), landmarks_xy=xy,
                 track_ids=np.array([track_id], np.int64))


def collect_all(stage: GpuSwapStage, n: int) -> list[Packet]:
    out = []
    for _ in range(n):
        p = stage.collect(timeout_s=60.0)
        assert p is not None, "a submitted frame did not come back"
        out.append(p)
    return out


@pytest.mark.slow
def test_stage_equals_the_cpu_neural_stage_with_frames_in_flight(
        inswapper_dyn_path: Path, face_frame: FaceFrame) -> None:
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.swap.inswapper import InswapperModel
    from livecam.swap.neural import NeuralSwapStage

    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    asked: list[str] = []
    embed = embedding_table(("alice", "bob"), asked)
    state = RuntimeState(active_identity="alice", track_identities=((1, "bob"),))
    bypass = RuntimeState(active_identity="alice", bypass=True)
    with GpuSwapStage(make_hub(inswapper_dyn_path, embed), assign=()) as stage:
        assert stage.capacity == 3
        # three frames in flight, one bypassed between them (it needs no GPU)
        stage.submit(packet(0, image, faces, state))
        stage.submit(packet(1, image, faces, bypass))
        stage.submit(packet(2, image, faces, state))
        outs = collect_all(stage, 3)
        assert stage.hub.ticks == 2
        assert stage.collect(timeout_s=0.01) is None
    assert [p.frame.index for p in outs] == [0, 1, 2]
    assert outs[1].image_bgr is image  # bypass: the frame itself
    # track 1's bob first and once (cached); the active alice may be prepared ahead meanwhile
    assert asked[0] == "bob" and asked.count("bob") == 1 and set(asked) <= {"alice", "bob"}
    np.testing.assert_array_equal(outs[0].image_bgr, outs[2].image_bgr)
    assert (image == face_frame.frame_bgr).all()  # the input was not written into
    cpu = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(inswapper_dyn_path, device="cpu"),
                                         inswapper_dyn_path), embed)
    with cpu:
        ref = cpu.process(packet(0, image, faces, state))
    diff = np.abs(outs[0].image_bgr.astype(int) - ref.image_bgr.astype(int))
    assert (ref.image_bgr != image).any(axis=-1).mean() > 0.015  # the outline: 2.4 %
    assert diff.mean() < 0.1 and (diff > 3).mean() < 2e-3, (diff.mean(), (diff > 3).mean())


@pytest.mark.slow
def test_streams_share_ticks_and_keep_their_own_frames(inswapper_dyn_path: Path,
                                                       face_frame: FaceFrame) -> None:
    """Requests that wait while the slots are busy go out together: one tick, one generator
    call for the faces of both streams; each stream gets exactly its own frame back."""
    embed = embedding_table(("alice", "bob"), [])
    hub = make_hub(inswapper_dyn_path, embed, n_streams=3, collector_thread=False)
    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    mirrored = np.ascontiguousarray(image[:, ::-1])
    mirror_faces = faces_of(FaceFrame(mirrored, face_frame.landmarks_xy * [-1, 1]
                                      + [image.shape[1] - 1, 0], face_frame.latents))
    s0, s1, s2 = (GpuSwapStage(hub, stream=k) for k in range(3))
    alice, bob = RuntimeState(active_identity="alice"), RuntimeState(active_identity="bob")
    with s0, s1, s2:
        for k in range(3):  # stream 0 fills the three slots: one frame per tick
            s0.submit(packet(k, image, faces, alice))
        s1.submit(packet(0, mirrored, mirror_faces, bob))  # these two wait for a slot
        s2.submit(packet(0, image, faces, alice))
        assert hub.ticks == 3
        while hub.collect_next(0.0):
            pass
        assert hub.ticks == 4 and list(hub.frames_per_tick) == [1, 1, 1, 2]
        out0, out1, out2 = collect_all(s0, 3), collect_all(s1, 1), collect_all(s2, 1)
    assert [p.frame.index for p in out0] == [0, 1, 2]
    for p in [*out0[1:], *out2]:  # out2's tick ran batch 2
        assert_same_swap(p.image_bgr, out0[0].image_bgr)
    # stream 1 alone on a fresh hub: the same frame as in the shared tick
    alone = GpuSwapStage(make_hub(inswapper_dyn_path, embed))
    with alone:
        alone.submit(packet(0, mirrored, mirror_faces, bob))
        (ref,) = collect_all(alone, 1)
    assert (out1[0].image_bgr != mirrored).any()
    assert_same_swap(out1[0].image_bgr, ref.image_bgr)


@pytest.mark.slow
def test_a_failed_tick_fails_only_its_frames(inswapper_dyn_path: Path,
                                             face_frame: FaceFrame) -> None:
    embed = embedding_table(("alice",), [])
    generator = Generator(inswapper_dyn_path, fail_on=frozenset({1}))
    state = RuntimeState(active_identity="alice")
    with GpuSwapStage(make_hub(inswapper_dyn_path, embed, generator=generator)) as stage:
        for k in range(3):
            stage.submit(packet(k, face_frame.frame_bgr, faces_of(face_frame), state))
        first = stage.collect(60.0)
        with pytest.raises(RuntimeError, match="device error"):
            stage.collect(60.0)
        third = stage.collect(60.0)
        # the stream's buffers came back: it goes on
        stage.submit(packet(3, face_frame.frame_bgr, faces_of(face_frame), state))
        fourth = stage.collect(60.0)
    assert first is not None and third is not None and fourth is not None
    np.testing.assert_array_equal(first.image_bgr, third.image_bgr)
    np.testing.assert_array_equal(first.image_bgr, fourth.image_bgr)


@pytest.mark.slow
def test_unknown_identity_is_covered_never_sent_real_and_is_logged_once(
        inswapper_dyn_path: Path, face_frame: FaceFrame,
        caplog: pytest.LogCaptureFixture) -> None:
    """Fail closed on the GPU path: before, a face whose identity cannot be loaded went out
    as it was (the real face). Now it is covered; ``advanced.swap.unswappable: real`` keeps the old
    behaviour as an explicit choice."""
    asked: list[str] = []
    state = RuntimeState(active_identity="ghost")
    faces = faces_of(face_frame)
    # a frozen clock: the retry interval never passes, however slow the frames are
    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), asked), clock=lambda: 100.0)
    with GpuSwapStage(hub) as stage, caplog.at_level(logging.WARNING, "livecam.gpupipe.hub"):
        for k in range(3):
            stage.submit(packet(k, face_frame.frame_bgr, faces, state))
        outs = collect_all(stage, 3)
    assert hub.ticks == 0  # nothing to swap: the GPU was not asked
    assert asked == ["ghost"]  # retried only after missing_log_interval_s
    assert sum("ghost" in r.getMessage() for r in caplog.records) == 1
    x0, y0, x1, y1 = (int(v) for v in faces.boxes_xyxy[0])
    inside = (slice(y0 + (y1 - y0) // 4, y1 - (y1 - y0) // 4),
              slice(x0 + (x1 - x0) // 4, x1 - (x1 - x0) // 4))
    for out in outs:
        change = np.abs(out.image_bgr.astype(np.int16)
                        - face_frame.frame_bgr.astype(np.int16))
        assert change[inside].mean() > 3  # the face is covered, not the real one
        assert change[:20, :20].max() == 0  # away from the face nothing changed

    real = make_hub(inswapper_dyn_path, embedding_table(("alice",), []), clock=lambda: 100.0)
    with GpuSwapStage(real, cover=FaceCover(mode="real")) as stage:
        stage.submit(packet(0, face_frame.frame_bgr, faces, state))
        (out,) = collect_all(stage, 1)
    assert out.image_bgr is face_frame.frame_bgr  # the user asked for the real face


@pytest.mark.slow
def test_a_switch_covers_the_face_rather_than_hold_the_previous_identity(
        inswapper_dyn_path: Path, face_frame: FaceFrame) -> None:
    """The frame after a switch to an identity that cannot be loaded (yet) shows the cover,
    not the last good swap of the identity switched away from (``hold`` is for a face that
    cannot be swapped, not for the old identity)."""
    from livecam.core.types import Unswappable, WithheldFaces

    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), []), clock=lambda: 100.0)
    with GpuSwapStage(hub, cover=FaceCover(mode="hold", hold_frames=8)) as stage:
        stage.submit(packet(0, image, faces, RuntimeState(active_identity="alice")))
        stage.submit(packet(1, image, faces, RuntimeState(active_identity="ghost")))
        swapped, switched = collect_all(stage, 2)
    assert (swapped.image_bgr != image).any()
    withheld = WithheldFaces.from_faces(faces, Unswappable.IDENTITY_MISSING)
    assert (switched.image_bgr == FaceCover(mode="cover").cover(image, withheld, 1)).all()


def test_a_known_identity_does_not_wait_for_another_identitys_embedding(
        inswapper_dyn_path: Path) -> None:
    """An identity seen for the first time is embedded on the identity thread (its photos
    read, ArcFace run: a second or more on a first start). Known and recently missing
    identities were looked up under the lock that embedding held, so one stream switching to
    a new identity held every other stream's swap that long."""
    from livecam.core.types import Unswappable

    embed = HeldIdentity(embedding_table(("alice", "bob"), []), "bob")
    hub = make_hub(inswapper_dyn_path, embed, n_streams=2)
    hub.acquire()
    try:
        known = hub.latent("alice")
        assert isinstance(known, np.ndarray)
        assert hub.latent("carol") is Unswappable.IDENTITY_MISSING  # no such identity
        slow = threading.Thread(target=hub.latent, args=("bob",), daemon=True)
        slow.start()
        got = embed.returns_while_held(lambda: [hub.latent("alice"), hub.latent("carol")])
        slow.join(60)
        assert np.array_equal(got[0], known) and got[1] is Unswappable.IDENTITY_MISSING
        assert isinstance(hub.latent("bob"), np.ndarray)
    finally:
        embed.release.set()
        hub.release()


@pytest.mark.slow
def test_a_switch_to_an_identity_being_embedded_covers_the_face_and_does_not_wait(
        inswapper_dyn_path: Path, face_frame: FaceFrame) -> None:
    """The identities a user can switch to are embedded ahead on the hub's identity thread.
    Before, the first frame after a switch to one never embedded before ran the embedding on
    the stream's swap thread (a second or more on a first start) and the stream's frames
    waited that long. Now that face is covered until its latent is ready."""
    from livecam.core.types import Unswappable, WithheldFaces

    embed = HeldIdentity(embedding_table(("alice", "bob"), []), "bob")
    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    names = ("alice", "bob")
    bob = RuntimeState(active_identity="bob", identities=names)
    hub = make_hub(inswapper_dyn_path, embed)
    try:
        with GpuSwapStage(hub) as stage:
            stage.submit(packet(0, image, faces, RuntimeState(active_identity="alice",
                                                              identities=names)))
            (alice,) = collect_all(stage, 1)
            assert (alice.image_bgr != image).any()
            embed.returns_while_held(lambda: stage.submit(packet(1, image, faces, bob)))
            (covered,) = collect_all(stage, 1)
            withheld = WithheldFaces.from_faces(faces, Unswappable.IDENTITY_LOADING)
            assert (covered.image_bgr == FaceCover().cover(image, withheld, 1)).all()
            assert hub._latents.wait("bob", 60)
            stage.submit(packet(2, image, faces, bob))
            (swapped,) = collect_all(stage, 1)
            assert (swapped.image_bgr != covered.image_bgr).any()
            assert (swapped.image_bgr != alice.image_bgr).any()  # bob's face, not alice's
    finally:
        embed.release.set()


def test_missing_model_names_the_fetch_command(tmp_path: Path) -> None:
    from livecam.app import SharedStages

    config = load_config(None, ["swap.mode=neural", f"advanced.models.dir={tmp_path}",
                                "advanced.engine.device=cpu", "advanced.gpu.pipeline=always"])
    assert gpu_pipeline_wanted(config)
    *_, stage = build_gpu_stages(gpu_sections(config), identities=_NoIdentities(),
                                 shared=SharedStages())
    with pytest.raises(ModelError, match=r"livecam models fetch inswapper_128"):
        stage.open()


def test_the_gpu_builders_take_their_sections_not_the_whole_config(tmp_path: Path) -> None:
    """Issue 43: a factory receives its own typed sections; app.py picks the GPU pipeline and
    hands it them (a whole config used to be read into, and so were its choices)."""
    from livecam.app import SharedStages
    from livecam.gpupipe.factory import build_hub

    config = load_config(None, ["swap.mode=neural", f"advanced.models.dir={tmp_path}",
                                "advanced.engine.device=cpu", "advanced.gpu.pipeline=always"])
    refused = r"the GPU pipeline's sections \(livecam.app.gpu_sections\(config\)\), not Config"
    with pytest.raises(TypeError, match=refused):
        build_gpu_stages(config, identities=_NoIdentities(),  # type: ignore[arg-type]
                         shared=SharedStages())
    with pytest.raises(TypeError, match=refused):
        build_hub(config, _NoIdentities(), n_streams=1)  # type: ignore[arg-type]
    sections = gpu_sections(config)
    assert sections.fps == config.capture.fps and sections.swap is config.swap
    *_, stage = build_gpu_stages(sections, identities=_NoIdentities(), shared=SharedStages())
    assert isinstance(stage, GpuSwapStage)


class _NoIdentities:
    def load(self, name: str) -> Any:
        raise IdentityError(f"no identity {name!r}")


def test_gpu_pipeline_wanted_follows_the_config() -> None:
    import torch

    def wanted(*overrides: str) -> bool:
        return gpu_pipeline_wanted(load_config(None, list(overrides)))

    assert not wanted("advanced.gpu.pipeline=always")  # classic swap: no GPU pipeline
    assert wanted("swap.mode=neural", "advanced.gpu.pipeline=always")
    assert not wanted("swap.mode=neural", "advanced.gpu.pipeline=never")
    assert not wanted("swap.mode=neural", "advanced.engine.device=cpu")
    assert not wanted("swap.mode=neural", "engine.backend=onnxruntime")
    assert wanted("swap.mode=neural") == torch.cuda.is_available()


@pytest.mark.slow
def test_livecam_run_swaps_two_streams_on_one_gpu_swap(tmp_path: Path,
                                                       astronaut_bgr: np.ndarray) -> None:
    """`livecam run` as built for two input/output pairs with the GPU swap (on the CPU here):
    installed (stand-in) models, a library identity, the same analysis stage as the CPU path,
    one hub for both streams, frames in flight through the runtime's collector."""
    import cv2
    from insightface.data import get_image

    from livecam.app import build_streams
    from livecam.identity.model import IdentityCollection
    from tests.gpupipe.stage_support import face_frame, identity_from_photo, install_standin_models

    models_dir, manifests_dir = install_standin_models(tmp_path)
    config = load_config(None, [
        "swap.mode=neural", f"advanced.models.dir={models_dir}",
        f"advanced.models.manifests_dir={manifests_dir}",
        "advanced.engine.device=cpu", f"advanced.engine.cache_dir={tmp_path / 'cache' / 'engines'}",
        "advanced.gpu.pipeline=always", "analysis.max_faces=2", "advanced.gpu.paste_window_px=320",
        "advanced.pipeline.realtime=false", "advanced.pipeline.status_interval_s=0",
        "control.api=false",
        "control.hotkeys=false", f"identity.library_dir={tmp_path / 'lib'}"])
    live = [face_frame(astronaut_bgr), face_frame(get_image("t1")[60:460, 0:400])]
    paths = []
    for k, image in enumerate(live):
        paths.append(tmp_path / f"live{k}.png")
        cv2.imwrite(str(paths[-1]), image)
    identities = IdentityCollection({"astro": identity_from_photo("astro", astronaut_bgr)})
    streams = build_streams(config, pairs=[(f"image:{p}", "null") for p in paths],
                            identities=identities, max_frames=6,
                            state=RuntimeState(active_identity="astro", identities=("astro",)))
    stages = [a.stages for a in streams.apps]
    assert [type(s[-1]).__name__ for s in stages] == ["GpuSwapStage", "GpuSwapStage"]
    assert stages[0][-1].hub is stages[1][-1].hub  # type: ignore[attr-defined]
    streams.run()
    for app, image in zip(streams.apps, live, strict=True):
        last = app.live.last()
        assert last is not None and app.metrics.counter("sent") == 6
        changed = (last.image_bgr != image).any(axis=-1)
        assert changed.mean() > 0.02, "the stream's faces were not swapped"
        assert "swap.gpu" not in app.metrics.stage_times_ms()  # no GPU clock on a CPU
        assert len(app.metrics.stage_times_ms()["swap.tick"]) >= 4
    # the identity's embedding was computed by ArcFace and cached on disk like the CPU stage's
    assert list((tmp_path / "cache" / "embeddings").rglob("*.npy"))


@pytest.mark.slow
def test_a_frame_already_on_the_device_is_not_uploaded_again(inswapper_dyn_path: Path,
                                                             face_frame: FaceFrame) -> None:
    """The follower's GPU networks keep the frame they uploaded; the swap copies it on the
    device (its pinned input buffer stays untouched) and swaps the same pixels."""
    import torch

    embed = embedding_table(("alice",), [])
    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    state = RuntimeState(active_identity="alice")
    kept = torch.from_numpy(image.copy())
    asked: list[np.ndarray] = []

    def device_frame(img: np.ndarray) -> tuple[Any, Any] | None:
        asked.append(img)
        return (kept, None) if img is image else None

    with GpuSwapStage(make_hub(inswapper_dyn_path, embed), device_frame=device_frame) as shared, \
            GpuSwapStage(make_hub(inswapper_dyn_path, embed)) as uploaded:
        shared.submit(packet(0, image, faces, state))
        uploaded.submit(packet(0, image, faces, state))
        (a,), (b,) = collect_all(shared, 1), collect_all(uploaded, 1)
        untouched = all(not buf.numpy().any() for bufs in shared._buffers.values()
                        for buf in bufs.inputs)
    assert asked and asked[0] is image
    assert untouched
    assert (a.image_bgr != image).any()
    np.testing.assert_array_equal(a.image_bgr, b.image_bgr)


def test_a_face_behind_a_swapped_one_is_covered_around_it_not_on_it(
        inswapper_dyn_path: Path, face_frame: FaceFrame) -> None:
    """Two faces crossing: the one behind, partly hidden, is withheld (``LOST``), and the GPU
    stage draws covers after the swap. Before, its cover was painted over the swapped face in
    front (the person in full view got a blurred patch: ``crossing``, 4 more of its face-frames
    covered offline with the covers drawn last). Now the front face shows its swap, and the face
    behind stays covered where it is seen beside it."""
    from livecam.core.types import Unswappable, WithheldFaces

    image, faces = face_frame.frame_bgr, faces_of(face_frame)
    x0, y0, x1, y1 = faces.boxes_xyxy[0]
    shift = 0.45 * (x1 - x0)  # the face behind: its left half hidden by the one in front
    behind = WithheldFaces(boxes_xyxy=np.array([[x0 + shift, y0, x1 + shift, y1]], np.float32),
                           landmarks_xy=np.full((1, 0, 2), np.nan, np.float32),
                           track_ids=np.array([2], np.int64),
                           reasons=np.array([Unswappable.LOST], np.uint8))
    hub = make_hub(inswapper_dyn_path, embedding_table(("alice",), []))
    state = RuntimeState(active_identity="alice")
    with GpuSwapStage(hub, cover=FaceCover(mode="cover")) as stage:
        stage.submit(packet(0, image, faces, state))
        stage.submit(Packet(frame=Frame(1, 0, image), image_bgr=image, faces=faces, state=state,
                            withheld=behind))
        alone, crossing = collect_all(stage, 2)
    hull = np.zeros(image.shape[:2], np.uint8)
    cv2.fillPoly(hull, [cv2.convexHull(faces.landmarks_xy[0].astype(np.int32))], (1,))
    # the cut fades in over the hull's outer 3 % (FaceCover's _FRONT_RAMP): judged inside it
    inner = 2 * round(0.04 * float(max(x1 - x0, y1 - y0))) + 1
    front = cv2.erode(hull, np.ones((inner, inner), np.uint8)).astype(bool)
    overlap = front & (np.arange(image.shape[1]) > x0 + shift)[None, :]
    assert overlap.sum() > 1000  # the cover's region reaches well into the face in front
    assert_same_swap(crossing.image_bgr[front], alone.image_bgr[front])
    # beside the face in front, the face behind is covered (smoothed), not shown
    beside = ~cv2.dilate(hull, np.ones((5, 5), np.uint8)).astype(bool)
    beside[:, :int(x1 + 0.1 * (x1 - x0))] = False
    beside[:int(y0 + 0.3 * (y1 - y0))] = beside[int(y1 - 0.1 * (y1 - y0)):] = False
    # ... within the face behind (its box's inscribed ellipse: the front face's swap stays
    # inside its own outline, so the change there is the cover's)
    ellipse = np.zeros(image.shape[:2], np.uint8)
    centre = (round(float(x0 + shift + x1 + shift) / 2), round(float(y0 + y1) / 2))
    axes = (round(0.45 * float(x1 - x0)), round(0.48 * float(y1 - y0)))
    cv2.ellipse(ellipse, centre, axes, 0, 0, 360, (1,), -1)
    beside &= ellipse.astype(bool)
    change = np.abs(crossing.image_bgr.astype(np.int16) - image.astype(np.int16))
    assert beside.sum() > 500 and change[beside].mean() > 8  # measured 18.6

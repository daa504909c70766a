"""The GPU pipeline as a stage (``livecam run``), on the CPU: the same torch code as on CUDA.

Real photos, real MediaPipe weights (ported to torch), stand-in generator and recognizer (the
real ones are downloads). CUDA-only checks are marked ``gpu`` and skipped without a GPU.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.config import load_config
from livecam.config.gpu import GpuConfig
from livecam.core.errors import IdentityError, ModelError
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.gpupipe.factory import build_gpu_stages, gpu_pipeline_wanted
from livecam.gpupipe.stage import GpuSwapStage
from livecam.testing.standins import build_inswapper
from tests.gpupipe.stage_support import face_frame, identity_from_photo, install_standin_models

# Faces in these frames are small for BlazeFace's short range; the window fits them.
TEST_GPU = GpuConfig(detector_range="full", max_faces=2, paste_window_px=320)


@pytest.fixture(scope="module")
def generator_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_inswapper(tmp_path_factory.mktemp("gpu_stage") / "inswapper.onnx", batch="N")


def embedding_table(names: tuple[str, ...], asked: list[str]) -> Any:
    table = {n: np.random.default_rng(i).standard_normal(512).astype(np.float32)
             for i, n in enumerate(names)}

    def source_embedding(name: str) -> np.ndarray:
        asked.append(name)
        if name not in table:
            raise IdentityError(f"no identity {name!r}")
        return table[name]

    return source_embedding


def make_stage(path: Path, source_embedding: Any, device: str = "cpu",
               gpu: GpuConfig = TEST_GPU, **kwargs: Any) -> GpuSwapStage:
    from livecam.engines.torch_engine import TorchEngine

    engine = TorchEngine(path, device=device, precision="fp32", cuda_graphs=False)
    return GpuSwapStage(engine, path, source_embedding, gpu=gpu, **kwargs)


def packet(k: int, image: np.ndarray, state: RuntimeState) -> Packet:
    return Packet(frame=Frame(k, 0, image), image_bgr=image, state=state)


@pytest.mark.slow
def test_stage_equals_cpu_neural_stage_and_honours_state(generator_path: Path,
                                                         astronaut_bgr: np.ndarray) -> None:
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.swap.neural import InswapperModel, NeuralSwapStage

    image = face_frame(astronaut_bgr)
    asked: list[str] = []
    embed = embedding_table(("alice", "bob"), asked)
    # track 1 is assigned bob; everyone else gets the active identity
    state = RuntimeState(active_identity="alice", track_identities=((1, "bob"),))
    with make_stage(generator_path, embed) as stage:
        first = stage.process(packet(0, image, state))
        second = stage.process(packet(1, image, state))
        bypassed = stage.process(packet(2, image, RuntimeState(active_identity="alice",
                                                               bypass=True)))
        odd_size = stage.process(packet(3, np.full((240, 320, 3), 90, np.uint8), state))
    # first sight: the face is meshed and its track starts; it is swapped from the next frame
    assert first.image_bgr is image and first.faces.track_ids.tolist() == [1]
    assert second.faces.track_ids.tolist() == [1] and second.faces.has_landmarks
    assert asked == ["bob"]
    changed = (second.image_bgr != image).any(axis=-1)
    assert changed.mean() > 0.03
    assert (image == face_frame(astronaut_bgr)).all()  # the input was not written into

    # the CPU neural stage on the same landmarks, identity and generator
    cpu = NeuralSwapStage(InswapperModel(OnnxRuntimeEngine(generator_path, device="cpu"),
                                         generator_path), embed)
    with cpu:
        ref = cpu.process(packet(1, image, state).with_fields(faces=second.faces))
    diff = np.abs(second.image_bgr.astype(int) - ref.image_bgr.astype(int))
    assert diff.mean() < 0.1 and (diff > 3).mean() < 2e-3, (diff.mean(), (diff > 3).mean())

    # bypass: the input frame itself, faces still followed under the same id
    assert bypassed.image_bgr is image and bypassed.faces.track_ids.tolist() == [1]
    # a frame of another size re-allocates the slots; no face there
    assert len(odd_size.faces) == 0 and odd_size.image_bgr is odd_size.frame.image_bgr


@pytest.mark.slow
def test_unknown_identity_goes_out_unswapped_and_is_logged_once(
        generator_path: Path, astronaut_bgr: np.ndarray, caplog: pytest.LogCaptureFixture) -> None:
    image = face_frame(astronaut_bgr)
    asked: list[str] = []
    state = RuntimeState(active_identity="ghost")
    # a frozen clock: the retry interval never passes, however slow the frames are
    stage = make_stage(generator_path, embedding_table(("alice",), asked), clock=lambda: 100.0)
    with stage, caplog.at_level(logging.WARNING, logger="livecam.gpupipe.stage"):
        outs = [stage.process(packet(k, image, state)) for k in range(3)]
    assert all(o.image_bgr is image for o in outs)
    assert [o.faces.track_ids.tolist() for o in outs] == [[1], [1], [1]]
    assert asked == ["ghost"]  # retried only after missing_log_interval_s
    assert sum("ghost" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.slow
def test_track_ids_stay_with_their_faces_in_a_moving_clip(generator_path: Path) -> None:
    from insightface.data import get_image

    from livecam.testing.clips import Trajectory, face_sprites, make_clip, score_tracking
    from livecam.track.bytetrack import iou_matrix

    sprites = face_sprites(get_image("t1"))[:2]
    n = 16
    # two people walking past each other in two lanes, ~9 px per frame, detector every 5th
    lanes = [Trajectory.linear((110, 95), (250, 105), n, 100),
             Trajectory.linear((370, 265), (230, 255), n, 100)]
    frames, truth = make_clip(sprites, lanes, size=(480, 360), noise_sigma=2.0)
    state = RuntimeState(active_identity="alice")
    ids, boxes = [], []
    with make_stage(generator_path, embedding_table(("alice",), [])) as stage:
        for k, image in enumerate(frames):
            out = stage.process(packet(k, image, state))
            ids.append(out.faces.track_ids)
            boxes.append(out.faces.boxes_xyxy)
            if k >= 1:  # both faces swapped once tracked, nothing far from them touched
                changed = (out.image_bgr != image).any(axis=-1)
                assert changed.mean() > 0.02
    assert all(sorted(i.tolist()) == [1, 2] for i in ids), ids
    # each id stays on one person (the person whose box it overlaps in frame 0)
    owner: dict[int, int] = {}
    for t, (i, b) in enumerate(zip(ids, boxes, strict=True)):
        iou = iou_matrix(b, truth[t].boxes_xyxy)
        for row, tid in enumerate(i.tolist()):
            assert iou[row].max() > 0.5
            person = int(truth[t].ids[int(iou[row].argmax())])
            assert owner.setdefault(tid, person) == person, (t, tid, person)
    metrics = score_tracking(truth, ids, boxes)
    assert metrics["num_switches"] == 0 and metrics["mota"] > 0.95, metrics


def test_missing_model_names_the_fetch_command(tmp_path: Path) -> None:
    config = load_config(None, ["swap.mode=neural", f"models.dir={tmp_path}",
                                "engine.device=cpu", "gpu.pipeline=always"])
    assert gpu_pipeline_wanted(config)
    (stage,) = build_gpu_stages(config, identities=_NoIdentities())
    with pytest.raises(ModelError, match=r"livecam models fetch inswapper_128"):
        stage.open()


class _NoIdentities:
    def load(self, name: str) -> Any:
        raise IdentityError(f"no identity {name!r}")


def test_gpu_pipeline_wanted_follows_the_config() -> None:
    import torch

    def wanted(*overrides: str) -> bool:
        return gpu_pipeline_wanted(load_config(None, list(overrides)))

    assert not wanted("gpu.pipeline=always")  # classic swap: no GPU pipeline
    assert wanted("swap.mode=neural", "gpu.pipeline=always")
    assert not wanted("swap.mode=neural", "gpu.pipeline=never")
    assert not wanted("swap.mode=neural", "engine.device=cpu")
    assert not wanted("swap.mode=neural", "engine.backend=onnxruntime")
    assert wanted("swap.mode=neural") == torch.cuda.is_available()


@pytest.mark.slow
def test_factory_runs_installed_models_with_a_library_identity(tmp_path: Path,
                                                               astronaut_bgr: np.ndarray) -> None:
    from insightface.data import get_image

    from livecam.identity.model import IdentityCollection

    models_dir, manifests_dir = install_standin_models(tmp_path)
    config = load_config(None, ["swap.mode=neural", f"models.dir={models_dir}",
                                f"models.manifests_dir={manifests_dir}", "engine.device=cpu",
                                f"engine.cache_dir={tmp_path / 'cache' / 'engines'}",
                                "gpu.pipeline=always", "gpu.detector_range=full",
                                "gpu.max_faces=2", "gpu.paste_window_px=320"])
    identities = IdentityCollection({"astro": identity_from_photo("astro", astronaut_bgr)})
    (stage,) = build_gpu_stages(config, identities)
    # two real people from another photo as the live faces
    live = face_frame(get_image("t1")[60:460, 0:400])
    stage.open()
    try:
        outs = [stage.process(packet(k, live, RuntimeState(active_identity="astro")))
                for k in range(2)]
        other = stage.process(packet(2, live, RuntimeState(active_identity="nobody")))
    finally:
        stage.close()
    assert sorted(outs[1].faces.track_ids.tolist()) == [1, 2]
    changed = (outs[1].image_bgr != live).any(axis=-1)
    for x1, y1, x2, y2 in outs[1].faces.boxes_xyxy.astype(int):  # both faces swapped
        assert changed[y1:y2, x1:x2].mean() > 0.3
    assert other.image_bgr is live  # unknown name: unswapped, not an error
    # the identity's embedding was computed by ArcFace and cached on disk like the CPU stage's
    assert list((tmp_path / "cache" / "embeddings").rglob("*.npy"))


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()",
                    reason="CUDA is not available (the same stage runs on the CPU above)")
def test_cuda_stage_matches_the_cpu_stage(generator_path: Path,
                                          astronaut_bgr: np.ndarray) -> None:
    image = face_frame(astronaut_bgr, (1280, 720))
    state = RuntimeState(active_identity="alice")
    outs = {}
    for device in ("cuda", "cpu"):
        gpu = GpuConfig(detector_range="full", precision="fp32", max_faces=2)
        stage = make_stage(generator_path, embedding_table(("alice",), []), device, gpu)
        with stage:
            out = [stage.process(packet(k, image, state)) for k in range(3)][-1]
            if device == "cuda":
                assert all(m.startswith(("graph", "segmented")) for m in
                           stage.graph_modes.values()), stage.graph_modes
            outs[device] = out
    np.testing.assert_allclose(outs["cuda"].faces.landmarks_xy, outs["cpu"].faces.landmarks_xy,
                               atol=0.5)
    diff = np.abs(outs["cuda"].image_bgr.astype(int) - outs["cpu"].image_bgr.astype(int))
    assert (outs["cpu"].image_bgr != image).any() and diff.mean() < 0.2


@pytest.mark.slow
def test_stage_follows_swap_assign(generator_path: Path, astronaut_bgr: np.ndarray) -> None:
    """``swap.assign`` names the first person to appear, as in the CPU swap stages."""
    image = face_frame(astronaut_bgr)
    asked: list[str] = []
    embed = embedding_table(("alice", "bob"), asked)
    state = RuntimeState(active_identity="alice")
    with make_stage(generator_path, embed, assign=("bob",)) as stage:
        stage.process(packet(0, image, state))
        swapped = stage.process(packet(1, image, state))
    assert swapped.faces.track_ids.tolist() == [1]
    assert asked == ["bob"]


@pytest.mark.slow
def test_stage_swaps_only_the_faces_analysis_select_keeps(generator_path: Path,
                                                          astronaut_bgr: np.ndarray) -> None:
    """``analysis.select: largest`` with two people: only the larger face changes."""
    import cv2

    from livecam.analysis.select import FaceSelector

    image = np.full((360, 720, 3), 120, np.uint8)
    image[:, :360] = cv2.resize(astronaut_bgr, (360, 360), interpolation=cv2.INTER_AREA)
    image[40:340, 400:700] = cv2.resize(astronaut_bgr, (300, 300), interpolation=cv2.INTER_AREA)
    embed = embedding_table(("alice",), [])
    state = RuntimeState(active_identity="alice")
    with make_stage(generator_path, embed, selector=FaceSelector("largest")) as stage:
        outs = [stage.process(packet(k, image, state)) for k in range(3)]
    last = outs[-1]
    # the stage reports the selected face only, as the CPU analysis does
    assert len(last.faces) == 1 and last.faces.boxes_xyxy[0, 2] < 360
    changed = (last.image_bgr != image).any(axis=-1)
    assert changed[:, :360].mean() > 0.02  # the larger face is swapped
    assert not changed[:, 380:].any()  # the smaller one is left alone

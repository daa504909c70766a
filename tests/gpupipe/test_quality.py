"""Pixel boost, the face enhancer and hands in front of the face inside the GPU pipeline (issue
13), run on the CPU (the same code as on CUDA, without streams and graphs): built from the
config as ``livecam run`` builds them, each against the CPU path on real photos.

The models are stand-ins with the real interfaces (the real swapper, recognizer and restorers
are downloads), installed the way users install the real ones. Tolerances: the GPU twins
sample and blend in float32 where the CPU path uses OpenCV's fixed-point warps, so a few
pixels differ by more than a level (measured figures in docs/enhance.md); a test fails when
the outputs differ in substance (an option not applied, a face not enhanced, a hand painted
over).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from livecam.app import gpu_sections
from livecam.config import Config, load_config
from livecam.core.errors import ConfigError
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.gpupipe.factory import build_gpu_stages
from livecam.gpupipe.slots import Slot, SlotShape
from tests.gpupipe.conftest import FaceFrame
from tests.gpupipe.stage_support import identity_from_photo, install_standin_models
from tests.gpupipe.swap.conftest import t1_faces  # noqa: F401 (a fixture)
from tests.gpupipe.test_stage import faces_of
from tests.swap.test_occlusion import _clip, hand_sprite  # noqa: F401 (a fixture)

STATE = RuntimeState(active_identity="src")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gpu_quality")
    install_standin_models(root / "standins", enhancers=("gpen_bfr_256", "gfpgan_1.4"))
    return root


@pytest.fixture(scope="module")
def identities() -> Any:
    """The second person of insightface's t1.jpg as the identity to swap in."""
    from insightface.data import get_image

    from livecam.identity.model import IdentityCollection

    return IdentityCollection({"src": identity_from_photo("src", get_image("t1")[60:460, 0:400])})


def config_for(root: Path, *sets: str) -> Config:
    """``livecam run --set ...`` with the installed stand-ins: neural swap, the GPU pipeline on
    the CPU, the streamer's own eyes and mouth off unless ``sets`` turn them on (so each test
    sees its own option's effect alone)."""
    return load_config(None, [
        "swap.mode=neural", f"advanced.models.dir={root / 'standins' / 'models'}",
        f"advanced.models.manifests_dir={root / 'standins' / 'manifests'}",
        "advanced.engine.device=cpu",
        f"advanced.engine.cache_dir={root / 'cache' / 'engines'}", "advanced.gpu.pipeline=always",
        "advanced.gpu.paste_window_px=256", "analysis.max_faces=2", "swap.keep_mouth=false",
        "advanced.swap.keep_eyes=never", *sets])


def packet(k: int, image: np.ndarray, faces: Any) -> Packet:
    return Packet(frame=Frame(k, 0, image), image_bgr=image, faces=faces, state=STATE)


def run_gpu(config: Config, identities: Any, packets: list[Packet]) -> list[np.ndarray]:
    """The GPU pipeline's swap stage of ``config`` (as ``livecam run`` builds it), one frame
    in flight at a time."""
    from livecam.app import SharedStages

    *_, stage = build_gpu_stages(gpu_sections(config), identities, shared=SharedStages())
    outs = []
    with stage:
        for p in packets:
            stage.submit(p)  # type: ignore[union-attr]
            out = stage.collect(120.0)  # type: ignore[union-attr]
            assert out is not None
            outs.append(out.image_bgr)
    return outs


def run_cpu(config: Config, identities: Any, packets: list[Packet]) -> list[np.ndarray]:
    """The CPU path's swap stages of the same config (``advanced.gpu.pipeline: never``)."""
    from livecam.app import build_swap_stages

    stages = build_swap_stages(config, identities)
    for s in stages:
        s.open()
    try:
        outs = []
        for p in packets:
            for s in stages:
                p = s.process(p)
            outs.append(p.image_bgr)
        return outs
    finally:
        for s in stages:
            s.close()


def diff_stats(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = np.abs(a.astype(int) - b.astype(int))
    return float(d.mean()), float((d > 3).mean())


@pytest.fixture(scope="module")
def plain_gpu(installed: Path, identities: Any, face_frame: FaceFrame) -> np.ndarray:
    """The astronaut swapped by the GPU pipeline with none of the options."""
    (out,) = run_gpu(config_for(installed), identities,
                     [packet(0, face_frame.frame_bgr, faces_of(face_frame))])
    # the face's outline is 2.4 % of this frame
    assert (out != face_frame.frame_bgr).any(axis=-1).mean() > 0.015
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sets", [
    ("swap.enhancer=gfpgan_1.4", "advanced.swap.enhancer_blend=0.8",
     "advanced.swap.pixel_boost=256"),
    ("advanced.swap.pixel_boost=512", "swap.enhancer=gpen_bfr_256",
     "advanced.swap.enhancer_blend=1.0"),
], ids=["boost256+gfpgan", "boost512+gpen256"])
def test_options_run_in_the_gpu_pipeline_as_on_the_cpu_path(
        sets: tuple[str, ...], installed: Path, identities: Any, face_frame: FaceFrame,
        plain_gpu: np.ndarray) -> None:
    """Before: the GPU pipeline warned and swapped as without them (the first assert)."""
    config = config_for(installed, *sets)
    frames = [packet(0, face_frame.frame_bgr, faces_of(face_frame))]
    (gpu,) = run_gpu(config, identities, frames)
    (cpu,) = run_cpu(config, identities, frames)
    changed = (gpu != plain_gpu).any(axis=-1)
    mean, over3 = diff_stats(gpu, cpu)
    print(f"{sets}: {changed.mean():.4f} of the frame changed by the options; GPU vs CPU path "
          f"mean |diff| {mean:.4f}, > 3 levels {over3:.5f}")
    assert changed.mean() > 0.02, "the options changed nothing in the GPU pipeline"
    assert mean < 0.1 and over3 < 2e-3


def test_the_streamers_eyes_and_mouth_are_kept_as_on_the_cpu_path(
        installed: Path, identities: Any, face_frame: FaceFrame, plain_gpu: np.ndarray) -> None:
    """``advanced.swap.keep_eyes: always`` and ``swap.keep_mouth`` (the defaults) in the GPU
    pipeline. Before: it ignored them, so its output equalled the output without them (the first
    assert) and showed the source's eyes where the CPU path shows the streamer's."""
    config = config_for(installed, "advanced.swap.keep_eyes=always", "swap.keep_mouth=true",
                        "advanced.swap.mouth_size=1.3")
    frames = [packet(0, face_frame.frame_bgr, faces_of(face_frame))]
    (gpu,) = run_gpu(config, identities, frames)
    (cpu,) = run_cpu(config, identities, frames)
    from livecam.swap.features import EYE_LEFT_LOOP, EYE_RIGHT_LOOP

    xy = faces_of(face_frame).landmarks_xy[0]
    eyes = np.zeros(gpu.shape[:2], np.uint8)
    for loop in (EYE_RIGHT_LOOP, EYE_LEFT_LOOP):
        cv2.fillPoly(eyes, [np.round(xy[list(loop)]).astype(np.int32)], (1,))
    inside = eyes.astype(bool)
    changed = (gpu != plain_gpu).any(axis=-1)

    def from_streamer(out: np.ndarray) -> float:  # mean levels from the captured eyes
        return float(np.abs(out[inside].astype(int)
                            - face_frame.frame_bgr[inside].astype(int)).mean())

    mean, over3 = diff_stats(gpu, cpu)
    print(f"kept eyes/mouth: {changed[inside].mean():.3f} of the eye pixels changed; levels "
          f"from the streamer's eyes: GPU {from_streamer(gpu):.2f}, CPU path "
          f"{from_streamer(cpu):.2f}, without the option {from_streamer(plain_gpu):.2f}; GPU "
          f"vs CPU path mean |diff| {mean:.4f}, > 3 levels {over3:.5f}")
    assert changed[inside].mean() > 0.5, "the GPU pipeline did not keep the streamer's eyes"
    assert from_streamer(gpu) < 0.5 * from_streamer(plain_gpu)
    assert abs(from_streamer(gpu) - from_streamer(cpu)) < 0.5
    assert mean < 0.1 and over3 < 2e-3


@pytest.mark.slow
def test_t1_six_faces_boosted_and_enhanced_in_one_tick_equal_the_cpu_swap(
        t1_faces: Any, tmp_path: Path) -> None:  # noqa: F811
    """insightface's six people in one tick: 6 x 4 boosted tiles in one generator call, six
    faces through a batch-1 restorer (run face by face), against the CPU model."""
    from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
    from livecam.engines.torch_engine import TorchEngine
    from livecam.gpupipe.build import EnhancerOptions, build_program
    from livecam.gpupipe.scheduler import GpuScheduler, TickRows
    from livecam.gpupipe.slots import FrameBuffers
    from livecam.swap.enhance import FaceEnhancer
    from livecam.swap.inswapper import InswapperModel
    from tests.helpers.standins import build_enhancer, build_inswapper

    image, five = t1_faces.image_bgr, t1_faces.five_xy.astype(np.float32)
    n, (height, width) = len(five), image.shape[:2]
    swapper = build_inswapper(tmp_path / "inswapper.onnx", batch="N")
    restorer = build_enhancer(tmp_path / "gpen256.onnx", size_px=256)
    cpu = InswapperModel(OnnxRuntimeEngine(swapper, device="cpu"), swapper, pixel_boost_px=256,
                         enhancer=FaceEnhancer(OnnxRuntimeEngine(restorer, device="cpu"),
                                               size_px=256, template="arcface_128", blend=0.8))
    cpu.open()
    latents = cpu.latents(np.random.default_rng(3).standard_normal((n, 512))).astype(np.float32)
    expected = cpu.swap(image, five, latents)
    engines = [TorchEngine(p, device="cpu", precision="fp32", cuda_graphs=False)
               for p in (swapper, restorer)]
    for e in engines:
        e.open()
    program = build_program(engines[0], device="cpu", window_px=256, pixel_boost_px=256,
                            enhancer_engine=engines[1],
                            enhancer=EnhancerOptions(256, "arcface_128", blend=0.8))
    buffers = FrameBuffers(height, width, 1, pinned=False)
    buffers.inputs[0].numpy()[:] = image
    with GpuScheduler(program, SlotShape(1, height, width, n, program.latent_dim), "cpu") as s:
        s.submit(buffers.inputs, buffers.outputs,
                 TickRows(np.zeros(n, np.int64), five, latents, np.ones(n, bool)))
        result = s.collect()
    out = buffers.outputs[0].numpy()
    mean, over3 = diff_stats(out, expected)
    print(f"t1, {n} faces, boost 256 + gpen_bfr_256: GPU tick vs CPU mean |diff| {mean:.4f}, "
          f"> 3 levels {over3:.5f}")
    assert result.fits.all()
    assert (expected != image).any(axis=-1).mean() > 0.05
    assert mean < 0.1 and over3 < 2e-3


@pytest.mark.slow
def test_a_real_hand_stays_in_front_in_the_gpu_pipeline_as_on_the_cpu_path(
        installed: Path, identities: Any, astronaut_bgr: np.ndarray,
        hand_sprite: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:  # noqa: F811
    """t1's hand moved over the astronaut's face (tests/swap/test_occlusion.py's clip), the
    hands found by MediaPipe on the submitting thread, with the enhancer on: the GPU
    pipeline keeps the hand in front as the CPU path does. Before: the GPU pipeline ignored
    ``swap.hands_in_front`` and painted the swap over the hand."""
    import cv2

    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(astronaut_bgr).with_fields(track_ids=np.array([1], np.int64))
    clip = _clip(astronaut_bgr, hand_sprite, faces.boxes_xyxy[0], n=8)[2:6:3]
    packets = [packet(k, frame, faces) for k, (frame, _) in enumerate(clip)]
    config = config_for(installed, "swap.hands_in_front=true", "swap.enhancer=gpen_bfr_256",
                        "advanced.swap.hand_search_every_n_frames=1")
    gpu = run_gpu(config, identities, packets)
    cpu = run_cpu(config, identities, packets)
    # the same frames without hands_in_front: the swap's footprint, and the defect
    without = run_gpu(config_for(installed, "swap.enhancer=gpen_bfr_256"), identities, packets)
    kept: dict[str, list[float]] = {"gpu": [], "cpu": [], "without": []}
    stats = []
    for (frame, hand), g, c, w in zip(clip, gpu, cpu, without, strict=True):
        swapped = (w != frame).any(axis=-1)
        core = cv2.erode((hand > 0.99).astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        core &= swapped  # the hand where it lies over the swapped face
        assert core.sum() > 500
        for key, out in (("gpu", g), ("cpu", c), ("without", w)):
            kept[key].append(float((out == frame).all(axis=-1)[core].mean()))
        stats.append(diff_stats(g, c))
    print("hand pixels over the face kept in front:",
          {k: [round(v, 3) for v in vs] for k, vs in kept.items()},
          "; GPU vs CPU path (mean |diff|, > 3 levels):",
          [(round(m, 4), round(o, 5)) for m, o in stats])
    kept_before = kept["without"]
    assert max(kept_before) < 0.05  # the defect: the swap paints the hand
    assert min(kept["gpu"]) > 0.75
    assert max(m for m, _ in stats) < 0.15 and max(o for _, o in stats) < 3e-3


def test_hand_masks_are_uploaded_and_cleared() -> None:
    """A slot position keeps no hand of an earlier tick: the next frame without hands gets
    zeros (the paste reads the whole plane)."""
    slot = Slot.open(0, SlotShape(2, 40, 60, 2, 8, hands=True), "cpu")
    frames = [torch.zeros(40, 60, 3, dtype=torch.uint8)] * 2
    alpha = np.full((10, 20), 0.5, np.float32)
    alpha[0, 0] = 1.0
    slot.upload(frames, hands=[None, (5, 7, alpha)])
    assert slot.hands_dev is not None
    assert int(slot.hands_dev[1, 5, 7]) == 255 and int(slot.hands_dev[1, 6, 8]) == 128
    assert int(slot.hands_dev[1].sum()) == 255 + 199 * 128 and not slot.hands_dev[0].any()
    slot.upload(frames, hands=[(0, 0, alpha), None])
    assert not slot.hands_dev[1].any() and int(slot.hands_dev[0, 0, 0]) == 255
    # a box elsewhere (already uint8, as the stage hands it over) replaces the last one whole
    slot.upload(frames, hands=[(28, 38, np.full((12, 22), 7, np.uint8)), None])
    assert int(slot.hands_dev[0].sum()) == 12 * 22 * 7 and int(slot.hands_dev[0, 39, 59]) == 7
    assert torch.equal(slot.hands_dev, torch.from_numpy(slot.hands_host.numpy()))
    slot.upload(frames, hands=[None, None])
    assert not slot.hands_dev.any() and not slot.hands_host.numpy().any()


def test_an_unknown_enhancer_is_a_config_error(installed: Path, identities: Any) -> None:
    from livecam.app import SharedStages

    with pytest.raises(ConfigError, match=r"gfpgan_9.*gfpgan_1\.4, gpen_bfr_256"):
        build_gpu_stages(gpu_sections(config_for(installed, "swap.enhancer=gfpgan_9")), identities,
                         shared=SharedStages())


class _FixedHands:
    """A hand landmarker that always finds ``hands`` (MediaPipe itself is exercised above);
    counts its calls."""

    def __init__(self, hands: Any) -> None:
        self.hands, self.calls = hands, 0

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def detect(self, image_bgr: np.ndarray) -> Any:
        self.calls += 1
        return self.hands


def test_hands_stay_in_front_of_covers_and_are_not_searched_when_nothing_changes(
        inswapper_dyn_path: Path, face_frame: FaceFrame) -> None:
    """A face that is withheld (not yet confirmed) is covered on the host when its frame is
    collected: the hand found at submit is laid over the cover there, as the CPU stage lays it
    over covers; a bypassed frame (shown as captured) is not searched at all."""
    from livecam.analysis.hands import Hands
    from livecam.core.types import Unswappable, WithheldFaces
    from livecam.gpupipe.stage import GpuSwapStage
    from livecam.swap.occlusion import HandsInFront, hand_alpha
    from tests.gpupipe.test_stage import embedding_table, make_hub

    faces = faces_of(face_frame)
    x1, y1, x2, y2 = faces.boxes_xyxy[0]
    # a flat hand across the lower face: palm and fingers laid out from a scale
    u = (x2 - x1) / 4
    palm = [(x1 + u, y2), (x1 + u, y2 - u), (x1 + 1.5 * u, y2 - 1.2 * u),
            (x1 + 2 * u, y2 - 1.2 * u), (x1 + 2.5 * u, y2 - 1.2 * u), (x1 + 3 * u, y2 - u)]
    points = [palm[0]]
    for base in palm[1:]:
        points += [(base[0], base[1] - j * 0.3 * u) for j in range(4)]
    hands = Hands(np.asarray(points, np.float32)[None], np.ones(1, np.float32))
    landmarker = _FixedHands(hands)
    hub = make_hub(inswapper_dyn_path, embedding_table(("src",), []), hands=True)
    stage = GpuSwapStage(hub, hands=HandsInFront(landmarker))  # type: ignore[arg-type]
    image = face_frame.frame_bgr
    withheld = Packet(frame=Frame(0, 0, image), image_bgr=image,
                      withheld=WithheldFaces.from_faces(faces, Unswappable.PENDING), state=STATE)
    bypass = Packet(frame=Frame(1, 0, image), image_bgr=image, faces=faces,
                    state=RuntimeState(active_identity="src", bypass=True))
    with stage:
        stage.submit(withheld)
        covered = stage.collect(60.0)
        stage.submit(bypass)
        shown = stage.collect(60.0)
    assert covered is not None and shown is not None
    assert landmarker.calls == 1 and hub.ticks == 0  # covers need no GPU; bypass no search
    assert shown.image_bgr is image
    alpha = hand_alpha(hands, image.shape[:2])
    real = (covered.image_bgr == image).all(axis=-1)
    face = np.zeros(image.shape[:2], bool)
    face[int(y1):int(y2), int(x1):int(x2)] = True
    assert real[alpha > 0.999].all()  # the hand, in front of the cover
    assert (alpha > 0.999).sum() > 500
    assert real[face & (alpha == 0)].mean() < 0.2  # the rest of the face is covered

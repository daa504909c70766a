"""Our neural swap and ArcFace preprocessing against insightface 2.1 on the same stand-ins.

insightface's ``INSwapper.get`` / ``ArcFaceONNX.get`` are the reference implementation; both
are given our five points (from the MediaPipe mesh of real photos) as ``face.kps``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.engines.onnxruntime_engine import OnnxRuntimeEngine
from livecam.swap.arcface import ArcFaceEmbedder
from livecam.swap.inswapper import InswapperModel
from tests.helpers.standins import build_arcface, build_inswapper

insightface = pytest.importorskip("insightface")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("standins")
    return build_inswapper(root / "inswapper_128.onnx"), build_arcface(root / "w600k_r50.onnx")


@pytest.fixture(scope="module")
def t1_kps() -> tuple[np.ndarray, np.ndarray]:
    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo

    image = insightface.data.get_image("t1")
    faces = analyze_photo(image)
    assert len(faces) >= 2
    return image, five_point(faces.landmarks_xy)


def _within_one(ours: np.ndarray, ref: np.ndarray) -> float:
    return float((np.abs(ours.astype(np.int16) - ref.astype(np.int16)) <= 1).mean())


@pytest.mark.slow
def test_swap_matches_insightface(models: tuple[Path, Path],
                                  t1_kps: tuple[np.ndarray, np.ndarray],
                                  astronaut_bgr: np.ndarray) -> None:
    from insightface.app.common import Face
    from insightface.model_zoo import get_model

    from livecam.analysis.landmarks import five_point
    from livecam.analysis.photo import analyze_photo

    swapper_path, arcface_path = models
    image, kps = t1_kps
    ref_swapper, ref_arcface = get_model(str(swapper_path)), get_model(str(arcface_path))
    source = Face(kps=kps[1])
    ref_arcface.get(image, source)
    ours = InswapperModel(OnnxRuntimeEngine(swapper_path, device="cpu"), swapper_path)
    ours.open()
    targets = [(image, kps[0]), (image, kps[2])]
    astro_faces = analyze_photo(astronaut_bgr)
    targets.append((astronaut_bgr, five_point(astro_faces.landmarks_xy)[0]))
    for target_image, target_kps in targets:
        ref = ref_swapper.get(target_image, Face(kps=target_kps), source, paste_back=True)
        out = ours.swap(target_image, target_kps[None], ours.latents(source.normed_embedding))
        changed = (ref != target_image).any(axis=-1).sum()
        assert changed > 2000, "the reference swap changed too little to compare"
        share = _within_one(out, ref)
        assert share >= 0.99, f"only {share:.4%} of pixels within 1 grey level"
        assert np.abs(out.astype(int) - ref.astype(int)).max() <= 3
    ours.close()


def test_arcface_matches_insightface(models: tuple[Path, Path],
                                     t1_kps: tuple[np.ndarray, np.ndarray]) -> None:
    from insightface.app.common import Face
    from insightface.model_zoo import get_model
    from insightface.utils import face_align

    _, arcface_path = models
    image, kps = t1_kps
    ref_model = get_model(str(arcface_path))
    embedder = ArcFaceEmbedder(OnnxRuntimeEngine(arcface_path, device="cpu"))
    embedder.open()
    for face_kps in kps[:3]:
        ref_crop = face_align.norm_crop(image, landmark=face_kps, image_size=112)
        crop = embedder.aligned(image, face_kps[None])[0]
        assert _within_one(crop, ref_crop) >= 0.99
        face = Face(kps=face_kps)
        ref_model.get(image, face)
        ours = embedder.embed(image, face_kps[None])[0]
        np.testing.assert_allclose(ours, face.embedding, rtol=0, atol=1e-4)
    embedder.close()

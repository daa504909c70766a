"""Temporal stability: on a still face with sensor noise the swap adds no flicker."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.analysis import build_stages
from livecam.config import load_config
from livecam.config.identity import IdentityConfig
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.identity import Identity, IdentityCollection, IdentityPhoto
from livecam.identity.photo import prepare_face
from livecam.swap.mesh import MeshTopology
from livecam.swap.stage import ClassicSwapStage
from tests.helpers.swap_eval import RealFace


def _flicker(frames: list[np.ndarray], region: np.ndarray) -> float:
    """Mean absolute frame-to-frame change inside ``region`` (grey levels)."""
    return float(np.mean([np.abs(frames[t].astype(int) - frames[t - 1].astype(int))[region].mean()
                          for t in range(1, len(frames))]))


@pytest.mark.slow
def test_still_noisy_face_swap_adds_no_flicker(by_label: dict[str, RealFace],
                                               topology: MeshTopology) -> None:
    source = by_label["t1-3"]
    prep = prepare_face(source.image_bgr, b"t1-3", source.landmarks_xy, source.landmarks_z,
                        IdentityConfig())
    identities = IdentityCollection({"c": Identity("c", (IdentityPhoto(
        prep.sha256, prep.texture_bgr, prep.landmarks_xy, prep.landmarks_z),))})
    config = load_config(None)
    still = by_label["astronaut"].image_bgr
    rng = np.random.default_rng(0)
    # a camera looking at a still face: same picture, fresh sensor noise (sigma 3) every frame
    frames = [np.clip(still + rng.normal(0, 3.0, still.shape), 0, 255).astype(np.uint8)
              for _ in range(30)]
    state = RuntimeState(active_identity="c")
    analysed = []
    stages = build_stages(config)  # the real analysis: detector, mesh, tracker, smoothing
    for stage in stages:
        stage.open()
    try:
        for i, image in enumerate(frames):
            packet = Packet.from_frame(Frame(i, i * 33_333_333, image), state)
            for stage in stages:
                packet = stage.process(packet)
            analysed.append(packet)
    finally:
        for stage in stages:
            stage.close()
    analysed = analysed[5:]  # let the tracker and the smoothing settle
    assert all(len(p.faces) == 1 for p in analysed)
    frozen_faces = analysed[0].faces
    with ClassicSwapStage(config.swap, identities) as swap:
        live = [swap.process(p).image_bgr for p in analysed]
        frozen = [swap.process(p.with_fields(faces=frozen_faces)).image_bgr for p in analysed]
    region = np.zeros(still.shape[:2], np.uint8)
    cv2.fillPoly(region, [np.round(frozen_faces.landmarks_xy[0][topology.face_oval])
                          .astype(np.int32)], 1)
    face = region > 0
    f_in = _flicker([p.image_bgr for p in analysed], face)
    f_live = _flicker(live, face)
    f_frozen = _flicker(frozen, face)
    assert (live[0] != analysed[0].image_bgr).any(axis=2)[face].mean() > 0.5  # it did swap
    assert f_live <= f_in
    assert abs(f_live - f_frozen) <= 0.2, (f_in, f_live, f_frozen)

"""Temporal stability: on a still face with sensor noise the swap adds no flicker."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.config import load_config
from livecam.core.types import RuntimeState
from livecam.swap.mesh import MeshTopology
from livecam.swap.stage import ClassicSwapStage
from tests.helpers.swap_eval import RealFace, analysed, one_identity


def _flicker(frames: list[np.ndarray], region: np.ndarray) -> float:
    """Mean absolute frame-to-frame change inside ``region`` (grey levels)."""
    return float(np.mean([np.abs(frames[t].astype(int) - frames[t - 1].astype(int))[region].mean()
                          for t in range(1, len(frames))]))


@pytest.mark.slow
def test_still_noisy_face_swap_adds_no_flicker(by_label: dict[str, RealFace],
                                               topology: MeshTopology) -> None:
    identities = one_identity(by_label["t1-3"], "c")
    config = load_config(None)
    still = by_label["astronaut"].image_bgr
    rng = np.random.default_rng(0)
    # a camera looking at a still face: same picture, fresh sensor noise (sigma 3) every frame
    frames = [np.clip(still + rng.normal(0, 3.0, still.shape), 0, 255).astype(np.uint8)
              for _ in range(30)]
    # the real analysis: detector, mesh, tracker, smoothing; then let them settle
    packets = analysed(frames, RuntimeState(active_identity="c"), config)[5:]
    assert all(len(p.faces) == 1 for p in packets)
    frozen_faces = packets[0].faces
    with ClassicSwapStage(config.swap, identities) as swap:
        live = [swap.process(p).image_bgr for p in packets]
        frozen = [swap.process(p.with_fields(faces=frozen_faces)).image_bgr for p in packets]
    region = np.zeros(still.shape[:2], np.uint8)
    cv2.fillPoly(region, [np.round(frozen_faces.landmarks_xy[0][topology.face_oval])
                          .astype(np.int32)], 1)
    face = region > 0
    f_in = _flicker([p.image_bgr for p in packets], face)
    f_live = _flicker(live, face)
    f_frozen = _flicker(frozen, face)
    assert (live[0] != packets[0].image_bgr).any(axis=2)[face].mean() > 0.5  # it did swap
    assert f_live <= f_in
    assert abs(f_live - f_frozen) <= 0.2, (f_in, f_live, f_frozen)

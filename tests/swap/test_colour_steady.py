"""Temporal (issue 42): on a moving face the swapped region's colour changes from frame to
frame no more than about 1.3x the live face's own colour does.

A real clip: the astronaut's face (skimage) moving across a 640x360 frame and growing, with
sensor noise (sigma 3), through the real analysis stages (detector, mesh, tracker, smoothing)
and the classic swap stage with t1-3 as the source. The colour statistics of the swap are
computed from the live face each frame; noise and the mesh's jitter moved them. Measured
with ``advanced.swap.colour_smoothing: 0`` (no smoothing, as before): the output's mean colour moved
0.54 per frame against the input's 0.19 (2.9x); with the default 0.75 (the past match moved with the
face onto this frame's grid): 0.24 (1.27x; the rest is the source's own teeth around the
streamer's kept mouth: 0.18 without ``keep_mouth``).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import cv2
import numpy as np
import pytest

from livecam.config import load_config
from livecam.core.types import RuntimeState
from livecam.swap.colour import ColourMemory
from livecam.swap.mesh import MeshTopology
from livecam.swap.stage import ClassicSwapStage
from tests.helpers.clips import Trajectory, face_sprites, make_clip
from tests.helpers.swap_eval import RealFace, analysed, one_identity


def _mean_lab(image: np.ndarray, xy: np.ndarray, topology: MeshTopology) -> np.ndarray:
    """Mean OpenCV Lab colour inside the face oval (eroded by 10 % of the face width)."""
    region = np.zeros(image.shape[:2], np.uint8)
    cv2.fillPoly(region, [np.round(xy[topology.face_oval]).astype(np.int32)], (1,))
    k = max(3, int(np.ptp(xy[:, 0]) * 0.1)) | 1
    region = cv2.erode(region, np.ones((k, k), np.uint8))
    lab = cv2.cvtColor(image, cv2.COLOR_BGR2LAB).astype(np.float64)
    return np.asarray(lab[region > 0].mean(axis=0))


def colour_steps(by_label: dict[str, RealFace], topology: MeshTopology,
                 *overrides: dict[str, object]) -> list[float]:
    """Mean frame-to-frame change (Lab distance) of the face region's mean colour: the input,
    then the swapped output under each of ``overrides`` (swap keys)."""
    identities = one_identity(by_label["t1-3"], "c")
    config = load_config(None)
    sprite = face_sprites(by_label["astronaut"].image_bgr)[0]
    n = 40
    frames, _ = make_clip([sprite], [Trajectory.linear((220, 180), (420, 190), n, 150, 190)],
                          size=(640, 360), noise_sigma=3.0)
    packets = analysed(frames, RuntimeState(active_identity="c"), config)
    keep = [t for t in range(5, n) if len(packets[t].faces) == 1]  # the tracker settled
    assert len(keep) >= n - 8
    xy = [packets[t].faces.landmarks_xy[0][:468] for t in keep]

    def steps(images: list[np.ndarray]) -> float:
        means = [_mean_lab(images[t], p, topology) for t, p in zip(keep, xy, strict=True)]
        return float(np.mean([np.linalg.norm(b - a) for a, b in pairwise(means)]))

    found = [steps([p.image_bgr for p in packets])]
    for override in overrides:
        with ClassicSwapStage(replace(config.swap, **override), identities) as swap:
            outputs = [swap.process(p).image_bgr for p in packets]
        x1, y1 = np.round(xy[0].min(axis=0)).astype(int)
        x2, y2 = np.round(xy[0].max(axis=0)).astype(int)
        changed = outputs[keep[0]][y1:y2, x1:x2] != packets[keep[0]].image_bgr[y1:y2, x1:x2]
        assert changed.any(axis=2).mean() > 0.5  # it did swap
        found.append(steps(outputs))
    return found


@pytest.mark.slow
def test_swapped_colour_changes_less_than_the_live_faces(by_label: dict[str, RealFace],
                                                         topology: MeshTopology) -> None:
    f_in, f_out, f_unsmoothed = colour_steps(by_label, topology, {}, {"colour_smoothing": 0.0})
    assert f_unsmoothed > 1.5 * f_in, (f_in, f_unsmoothed)  # the flicker, without smoothing
    assert f_out <= 1.3 * f_in, (f_in, f_out)  # the goal: ~1.3x the input at most


def test_colour_memory_starts_again_for_another_identity() -> None:
    memory = ColourMemory()
    grid, anchor = (0.0, 0.0, 2.0), (20.0, 20.0, 30.0)
    first = np.full((20, 20, 3), 10.0, np.float32)
    memory.smooth("a", np.ones(3, np.float32), first, 0.25, grid=grid, anchor=anchor)
    _, bias = memory.smooth("a", np.ones(3, np.float32), first * 3, 0.25, grid=grid,
                            anchor=anchor)
    assert np.allclose(bias, 15.0)  # a quarter of the new, three quarters of the past
    _, bias = memory.smooth("b", np.ones(3, np.float32), first * 3, 0.25, grid=grid,
                            anchor=anchor)
    assert np.allclose(bias, 30.0)  # another source photo: no past


def test_colour_memory_moves_the_past_match_with_the_face() -> None:
    """A bright spot of the bias at the face's centre stays at the face's centre when the
    face moves 7 px and the box's grid jumps a step."""
    memory = ColourMemory()
    past = np.zeros((30, 30, 3), np.float32)
    past[14:17, 14:17] = 90.0  # coarse (15, 15): frame (0 + 15.5 * 2 - 0.5) = 30.5
    memory.smooth("a", np.ones(3, np.float32), past, 0.5, grid=(0.0, 0.0, 2.0),
                  anchor=(30.5, 30.5, 40.0))
    now = np.zeros((30, 30, 3), np.float32)
    _, bias = memory.smooth("a", np.ones(3, np.float32), now, 0.5, grid=(4.0, 4.0, 2.0),
                            anchor=(37.5, 37.5, 40.0))
    # the face's centre is now at frame 37.5 = 4 + (j + 0.5) * 2 - 0.5: coarse j = 16.5
    peak = np.unravel_index(int(np.argmax(bias[:, :, 0])), bias.shape[:2])
    assert peak in {(16, 16), (16, 17), (17, 16), (17, 17)}

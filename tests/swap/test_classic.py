"""The classic swap of one face on real photos: where it paints, mouth/eyes/forehead, fading."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

from livecam.analysis import geometry
from livecam.config.swap import SwapConfig
from livecam.swap.classic import ClassicFaceSwapper, uncovered_turn_deg
from livecam.swap.mesh import MeshTopology
from livecam.swap.source import SourceFace
from tests.helpers.swap_eval import RealFace, source_from


def _swap(config: SwapConfig, topology: MeshTopology, source: SourceFace,
          target: RealFace) -> tuple[np.ndarray, object]:
    out = target.image_bgr.copy()
    info = ClassicFaceSwapper(config, topology).swap_into(
        out, target.image_bgr, source, target.landmarks_xy, target.landmarks_z)
    return out, info


def _polygon_mask(shape: tuple[int, ...], points: np.ndarray, scale: float = 1.0) -> np.ndarray:
    centre = points.mean(axis=0)
    pts = centre + (points - centre) * scale
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 1)
    return mask > 0


def test_swap_paints_the_face_and_nothing_else(by_label: dict[str, RealFace],
                                               topology: MeshTopology,
                                               astronaut_source: SourceFace) -> None:
    target = by_label["t1-2"]
    before = target.image_bgr.copy()
    out, info = _swap(SwapConfig(), topology, astronaut_source, target)
    assert (target.image_bgr == before).all()  # input untouched
    assert info.swapped and info.fade == 1.0  # type: ignore[attr-defined]
    changed = (out != target.image_bgr).any(axis=2)
    oval = _polygon_mask(out.shape, target.landmarks_xy[topology.face_oval])
    assert changed[oval].mean() > 0.7  # most of the face is new
    assert not changed[~_polygon_mask(out.shape, target.landmarks_xy[topology.face_oval],
                                      1.1)].any()  # nothing outside the face oval
    inner = _polygon_mask(out.shape, target.landmarks_xy[topology.face_oval], 0.8)
    diff = np.abs(out.astype(int) - target.image_bgr.astype(int)).mean(axis=2)
    assert diff[inner].mean() > 10


def test_open_target_mouth_is_kept(by_label: dict[str, RealFace],
                                   topology: MeshTopology) -> None:
    target = by_label["astronaut"]  # smiling with teeth: inner lips apart
    source = source_from(by_label["t1-3"], topology)
    mouth = _polygon_mask(target.image_bgr.shape, target.landmarks_xy[topology.mouth_inner], 0.7)
    # no shape transfer: the kept interior stays exactly where the streamer's is (with it, it
    # moves with the lips: tests/swap/test_features.py)
    still = SwapConfig(shape_transfer=0.0)
    kept, info = _swap(still, topology, source, target)
    replaced, info_off = _swap(dataclasses.replace(still, keep_mouth=False), topology, source,
                               target)
    assert info.kept_mouth and not info_off.kept_mouth  # type: ignore[attr-defined]
    d_kept = np.abs(kept.astype(int) - target.image_bgr.astype(int))[mouth].mean()
    d_replaced = np.abs(replaced.astype(int) - target.image_bgr.astype(int))[mouth].mean()
    assert d_kept < 3 < d_replaced


def _closed_eyes(face: RealFace) -> RealFace:
    """The same photo with its mesh's eyelids closed: the seam to fake a closed-eyes source,
    since no packaged photo has one. The texture still shows open eyes, so the test looks only
    at whether the live face's own eyes are kept."""
    xy = face.landmarks_xy.copy()
    for _corners, lids in ((geometry.EYE_RIGHT_CORNERS, geometry.EYE_RIGHT_LIDS),
                          (geometry.EYE_LEFT_CORNERS, geometry.EYE_LEFT_LIDS)):
        for up, low in lids:
            mid = (xy[up] + xy[low]) / 2
            xy[up] = xy[low] = mid
    return dataclasses.replace(face, landmarks_xy=xy)


def test_closed_source_eyes_keep_the_live_eyes(by_label: dict[str, RealFace],
                                               topology: MeshTopology) -> None:
    source = source_from(_closed_eyes(by_label["astronaut"]), topology)
    assert min(source.eyes_open) < SwapConfig().eye_closed_threshold
    target = by_label["t1-2"]
    eye = _polygon_mask(target.image_bgr.shape, target.landmarks_xy[topology.eye_right], 0.8)
    auto, info = _swap(SwapConfig(keep_eyes="auto", shape_transfer=0.0), topology, source,
                       target)
    never, info_never = _swap(SwapConfig(keep_eyes="never", shape_transfer=0.0), topology, source,
                              target)
    assert info.kept_eyes and not info_never.kept_eyes  # type: ignore[attr-defined]
    d_auto = np.abs(auto.astype(int) - target.image_bgr.astype(int))[eye].mean()
    d_never = np.abs(never.astype(int) - target.image_bgr.astype(int))[eye].mean()
    assert d_auto < 3 < d_never
    # an open-eyed source does not keep them under auto; the default keeps them always
    open_eyed = source_from(by_label["astronaut"], topology)
    _, info_open = _swap(SwapConfig(keep_eyes="auto"), topology, open_eyed, target)
    assert not info_open.kept_eyes  # type: ignore[attr-defined]
    _, info_default = _swap(SwapConfig(), topology, open_eyed, target)
    assert info_default.kept_eyes  # type: ignore[attr-defined]


def test_forehead_cut_keeps_the_live_forehead(by_label: dict[str, RealFace],
                                              topology: MeshTopology,
                                              astronaut_source: SourceFace) -> None:
    target = by_label["t1-3"]
    forehead = np.zeros(target.image_bgr.shape[:2], bool)
    for i in (151, 108, 337):
        x, y = np.round(target.landmarks_xy[i]).astype(int)
        forehead[y - 2:y + 3, x - 2:x + 3] = True
    cut, _ = _swap(SwapConfig(forehead="cut"), topology, astronaut_source, target)
    swapped, _ = _swap(SwapConfig(forehead="swap"), topology, astronaut_source, target)
    auto, _ = _swap(SwapConfig(forehead="auto"), topology, astronaut_source, target)
    diff = lambda img: np.abs(img.astype(int) - target.image_bgr.astype(int))[forehead].mean()  # noqa: E731
    assert diff(cut) < 2 < diff(swapped)
    # the astronaut's fringe covers her forehead: auto cuts it
    assert astronaut_source.forehead_skin < 0.4
    assert diff(auto) == diff(cut)
    assert source_from(by_label["t1-3"], topology).forehead_skin > 0.6


def test_uncovered_turn_and_fade() -> None:
    pose = geometry.HeadPose
    frontal = pose(0.0, 0.0, 0.0)
    assert uncovered_turn_deg(frontal, pose(25.0, 0.0, 0.0)) == pytest.approx(5.0)
    assert uncovered_turn_deg(pose(40.0, 0.0, 0.0), frontal) == pytest.approx(40.0)
    assert uncovered_turn_deg(pose(40.0, 0.0, 0.0), pose(50.0, 0.0, 0.0)) == pytest.approx(30.0)
    assert uncovered_turn_deg(pose(-30.0, 0.0, 0.0), pose(20.0, 0.0, 0.0)) == pytest.approx(30.0)


def test_fade_is_smooth_and_reaches_zero(by_label: dict[str, RealFace], topology: MeshTopology,
                                         astronaut_source: SourceFace) -> None:
    swapper = ClassicFaceSwapper(SwapConfig(), topology)
    fades = [swapper.fade_for(astronaut_source, geometry.HeadPose(yaw, 0.0, 0.0))
             for yaw in np.linspace(0, 90, 91)]
    assert fades[0] == 1.0 and fades[-1] == 0.0
    assert (np.diff(fades) <= 1e-9).all()
    assert np.abs(np.diff(fades)).max() < 0.08  # no jump: it fades over many degrees
    # a fully faded face is left as it was
    target = by_label["t1-2"]
    turned = dataclasses.replace(astronaut_source, pose=geometry.HeadPose(80.0, 0.0, 0.0))
    out, info = _swap(SwapConfig(), topology, turned, target)
    assert info.fade == 0.0 and not info.swapped  # type: ignore[attr-defined]
    assert (out == target.image_bgr).all()


def test_face_partly_outside_the_frame(by_label: dict[str, RealFace], topology: MeshTopology,
                                       astronaut_source: SourceFace) -> None:
    face = by_label["t1-2"]
    cut_x = int(face.landmarks_xy[1, 0])  # crop the frame through the nose
    image = np.ascontiguousarray(face.image_bgr[:, cut_x:])
    xy = face.landmarks_xy - np.array([cut_x, 0], np.float32)
    out = image.copy()
    info = ClassicFaceSwapper(SwapConfig(), topology).swap_into(out, image, astronaut_source,
                                                                xy, face.landmarks_z)
    assert info.swapped
    changed = (out != image).any(axis=2)
    assert changed[:, :40].mean() > 0.05  # the half inside the frame was swapped


def test_seamless_blend_swaps_too(by_label: dict[str, RealFace], topology: MeshTopology,
                                  astronaut_source: SourceFace) -> None:
    target = by_label["t1-2"]
    out, _info = _swap(SwapConfig(blend="seamless"), topology, astronaut_source, target)
    inner = _polygon_mask(out.shape, target.landmarks_xy[topology.face_oval], 0.7)
    assert np.abs(out.astype(int) - target.image_bgr.astype(int)).mean(axis=2)[inner].mean() > 8

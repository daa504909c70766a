"""The streamer's kept eyes and mouth drawn on the device (``livecam.gpupipe.swap.keep``): exact
coverage of known polygons, parity with the CPU path's mask on a real face mesh, and the GPU
stage sending loops (a few hundred bytes a face) instead of drawing a mask on the host."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from livecam.core.types import RuntimeState
from livecam.gpupipe.stage import GpuSwapStage
from livecam.gpupipe.swap import keep
from livecam.gpupipe.swap.keep import KeepLoops, coverage, kept_alpha, loop_rows_batch, oval_alpha
from livecam.swap import features
from tests.gpupipe.conftest import FaceFrame
from tests.gpupipe.test_stage import embedding_table, faces_of, make_hub, packet


def loop_rows(xy: np.ndarray, *, eyes: bool, mouth: bool,
              mouth_size: float = 1.0) -> tuple[np.ndarray, float]:
    """One face's rows and soft edge (loop_rows_batch of that face alone)."""
    rows, soft = loop_rows_batch(xy[None], eyes=eyes, mouth=mouth, mouth_size=mouth_size)
    return rows[0], float(soft[0])


def one_loop(points_xy: list[tuple[float, float]]) -> torch.Tensor:
    """(1, LOOPS, POINTS, 2): ``points_xy`` as the first loop (padded), the others empty."""
    rows = np.zeros((1, keep.LOOPS, keep.POINTS, 2), np.float32)
    pts = np.asarray(points_xy, np.float32)
    rows[0, 0, :len(pts)] = pts
    rows[0, 0, len(pts):] = pts[-1]
    return torch.from_numpy(rows)


@pytest.mark.parametrize("reverse", [False, True])
def test_coverage_of_a_rectangle_is_its_area_either_way_round(
        monkeypatch: pytest.MonkeyPatch, reverse: bool) -> None:
    """A rectangle with fractional sides: full pixels inside, the fractions on its columns and
    rows, zero outside, whichever way the loop runs (the two eyes run opposite ways)."""
    monkeypatch.setattr(keep, "GROW_PX", 0.0)
    corners = [(10.3, 20.0), (30.7, 20.0), (30.7, 40.0), (10.3, 40.0)]  # x spans 10.3..30.7
    if reverse:
        corners = corners[::-1]
    cov = coverage(one_loop(corners), torch.tensor([[0, 0]]), 64)[0].numpy()
    assert cov.sum() == pytest.approx(20.4 * 20.0, rel=2e-3)
    assert cov[30, 11:30].min() == pytest.approx(1.0)  # inside
    assert cov[30, 10] == pytest.approx(0.2, abs=1e-4)  # pixel 10 spans 9.5..10.5
    assert cov[30, 31] == pytest.approx(0.2, abs=1e-4)  # pixel 31 spans 30.5..31.5
    assert cov[30, 9] == 0.0 and cov[30, 32] == 0.0
    assert cov[20, 20] == pytest.approx(0.5) and cov[19, 20] == 0.0  # row 20 spans 19.5..20.5
    assert cov[:, :9].sum() == 0.0 and cov[:19].sum() == 0.0 and cov[41:].sum() == 0.0


def test_coverage_moves_with_the_window_and_clips_at_its_edges() -> None:
    """The loop in frame px against windows at other origins: shifted, cut at the window."""
    tri = one_loop([(100.0, 100.0), (160.0, 110.0), (120.0, 150.0)])
    at = coverage(tri, torch.tensor([[90, 95]]), 80)[0].numpy()
    moved = coverage(tri, torch.tensor([[80, 90]]), 96)[0].numpy()
    np.testing.assert_allclose(moved[5:85, 10:90], at, atol=1e-5)
    cut = coverage(tri, torch.tensor([[130, 95]]), 40)[0].numpy()  # x 130..169, cuts the tip
    np.testing.assert_allclose(cut, at[:40, 40:80], atol=1e-5)


def cpu_kept(xy: np.ndarray, mouth_size: float, shape_hw: tuple[int, int]) -> np.ndarray:
    """The CPU path's kept mask over a whole frame: each loop's ``region_alpha`` (OpenCV's
    anti-aliased fill and Gaussian edge), combined as 1 - the product of 1 - alpha."""
    soft = features.KEPT_EDGE_FRACTION * float(np.ptp(xy[:, 0]))
    shown = np.ones(shape_hw, np.float32)
    for loop in features.kept_loops(xy, eyes=True, mouth=True, mouth_size=mouth_size):
        shown *= 1.0 - features.region_alpha(loop, (0, 0), shape_hw, soft)
    return 1.0 - shown


@pytest.mark.parametrize(("scale", "worst", "mean"), [(1.0, 0.4, 0.06), (4.0, 0.12, 0.02)])
def test_kept_alpha_matches_the_cpu_paths_mask_on_a_real_face(
        face_frame: FaceFrame, scale: float, worst: float, mean: float) -> None:
    """The astronaut's mesh (MediaPipe; a face 66 px wide, eyes 10 px), and the same mesh 4x
    larger (a 1080p close-up, a softer edge): the device mask against the CPU path's. They
    differ most on small faces, where OpenCV's anti-aliased rim is a large part of an eye
    (measured: max 0.37, mean 0.048; at 4x 0.088 and 0.013); a wrong region differs by 1."""
    xy = face_frame.landmarks_xy[0] * np.float32(scale)
    rows, soft = loop_rows(xy, eyes=True, mouth=True, mouth_size=1.3)
    x0, y0 = np.floor(xy.min(axis=0)).astype(int) - 8
    win = 640
    got = kept_alpha(KeepLoops(torch.from_numpy(rows)[None], torch.tensor([soft])),
                     torch.tensor([[x0, y0]]), win)[0].numpy()
    want = cpu_kept(xy, 1.3, (y0 + win, x0 + win))[y0:, x0:]
    assert want.sum() > 100  # the eyes and mouth are in the window
    diff = np.abs(got - want)
    print(f"scale {scale}: soft {soft:.2f} px, kept area CPU {want.sum():.0f} device "
          f"{got.sum():.0f}, |diff| max {diff.max():.3f} mean over the regions "
          f"{diff[want > 0.01].mean():.4f}")
    assert got.sum() == pytest.approx(want.sum(), rel=0.05)
    assert diff.max() < worst and diff[want > 0.01].mean() < mean


@pytest.mark.parametrize(("scale", "worst"), [(1.0, 0.4), (4.0, 0.12)])
def test_oval_alpha_matches_the_cpu_paths_outline_on_a_real_face(
        face_frame: FaceFrame, scale: float, worst: float) -> None:
    """The share of the paste-back inside the face's outline, on the device and on the CPU
    path (``features.oval_alpha``), the astronaut's mesh and the same 4x larger: the same
    region, 0 on the outline and beyond; a face without an outline keeps the square. They
    differ on the rim, most on a small face (measured: max 0.30, mean 0.009; at 4x 0.074 and
    0.002)."""
    xy = face_frame.landmarks_xy[0] * np.float32(scale)
    rows, soft = loop_rows(xy, eyes=True, mouth=True)
    x0, y0 = np.floor(xy.min(axis=0)).astype(int) - 8
    win = 640
    origin = torch.tensor([[x0, y0]])
    got = oval_alpha(KeepLoops(torch.from_numpy(rows)[None], torch.tensor([soft])),
                     origin, win)[0].numpy()
    oval = xy[list(features.FACE_OVAL_LOOP)]
    want = features.oval_alpha(oval, (int(x0), int(y0)), (win, win))
    assert want is not None
    assert want.sum() > 1000 and want.max() == 1.0
    diff = np.abs(got - want)
    assert got.sum() == pytest.approx(want.sum(), rel=0.02)
    print(f"scale {scale}: |diff| max {diff.max():.3f} mean {diff[want > 0.01].mean():.4f}")
    assert diff.max() < worst and diff[want > 0.01].mean() < 0.02
    # nothing of the swap beyond the outline (its pixels, and one more for the rim)
    inside = np.zeros((win, win), np.uint8)
    cv2.fillPoly(inside, [np.round(oval - np.float32([x0, y0])).astype(np.int32)], (1,))
    inside = cv2.dilate(inside, np.ones((3, 3), np.uint8))
    assert not (got[inside == 0] > 0).any()
    rows[3] = 0.0  # no outline sent: the square as it is
    none = oval_alpha(KeepLoops(torch.from_numpy(rows)[None], torch.tensor([soft])), origin,
                      win)
    assert bool((none == 1.0).all())


def test_loop_rows_leave_out_what_is_not_kept(face_frame: FaceFrame) -> None:
    xy = face_frame.landmarks_xy[0]
    both, soft = loop_rows(xy, eyes=True, mouth=True, mouth_size=1.0)
    eyes, _ = loop_rows(xy, eyes=True, mouth=False)
    mouth, _ = loop_rows(xy, eyes=False, mouth=True, mouth_size=2.0)
    assert both.shape == (keep.LOOPS, keep.POINTS, 2) and both.dtype == np.float32
    assert soft == pytest.approx(features.KEPT_EDGE_FRACTION * np.ptp(xy[:, 0]))
    np.testing.assert_array_equal(eyes[:2], both[:2])
    assert not eyes[2].any() and not mouth[:2].any()
    for rows in (both, eyes, mouth):  # the outline, always
        np.testing.assert_array_equal(rows[3], xy[list(features.FACE_OVAL_LOOP)])
    inner = both[2, :len(features.MOUTH_INNER_LOOP)]
    centre = inner.mean(axis=0)
    np.testing.assert_allclose(mouth[2, :len(features.MOUTH_INNER_LOOP)],
                               centre + 2.0 * (inner - centre), rtol=1e-5)
    none = coverage(torch.from_numpy(np.stack([eyes]))[:, 2:], torch.tensor([[0, 0]]), 64)
    assert none.sum() == 0.0  # an empty loop keeps nothing


def test_a_loop_with_nan_keeps_nothing(face_frame: FaceFrame) -> None:
    """A mesh point that is NaN (a careless caller, a broken model) must not spread NaN over
    the paste-back's alpha (garbage pixels) nor keep the streamer's face: that loop is empty,
    the others stay."""
    xy = face_frame.landmarks_xy[0].copy()
    xy[features.EYE_LEFT_LOOP[3]] = np.nan
    rows, soft = loop_rows(xy, eyes=True, mouth=True)
    assert np.isfinite(rows).all() and np.isfinite(soft)
    assert not rows[1].any() and rows[0].any() and rows[2].any()
    alpha = kept_alpha(KeepLoops(torch.from_numpy(rows)[None], torch.tensor([soft])),
                       torch.tensor([[0, 0]]), 320)
    assert torch.isfinite(alpha).all() and float(alpha.max()) > 0.5


@pytest.mark.slow
def test_the_stage_sends_loops_not_a_mask(inswapper_dyn_path: Path,
                                          face_frame: FaceFrame) -> None:
    """With the eyes and mouth kept the request carries each face's loops and no host mask
    (before: a mask drawn on the stream's thread and uploaded as a frame plane; about 1 ms of
    Python a 1080p frame, which cost 8 streams their 30 fps on the H200)."""
    embed = embedding_table(("alice",), [])
    sent: list = []
    hub = make_hub(inswapper_dyn_path, embed)
    real_submit = hub.submit

    def submit(request):  # type: ignore[no-untyped-def]
        sent.append(request)
        real_submit(request)

    hub.submit = submit  # type: ignore[method-assign]
    with GpuSwapStage(hub, keep_eyes=True, keep_mouth=True) as stage:
        stage.submit(packet(0, face_frame.frame_bgr, faces_of(face_frame),
                            RuntimeState(active_identity="alice")))
        assert stage.collect(60.0) is not None
    (request,) = sent
    assert request.hands is None
    assert request.keep_xy.shape == (1, keep.LOOPS, keep.POINTS, 2)
    assert request.keep_soft.shape == (1,) and request.keep_soft[0] > 0
    assert not hub.hands  # no hand plane in the slots


def _loop_rows_one_by_one(xy: np.ndarray, eyes: bool, mouth: bool,
                          mouth_size: float) -> tuple[np.ndarray, float]:
    """The rows as first written, face by face from features.kept_loops and the face's
    outline (the reference)."""
    rows = np.zeros((keep.LOOPS, keep.POINTS, 2), np.float32)
    loops = [*features.kept_loops(xy, eyes=True, mouth=True, mouth_size=mouth_size),
             xy[list(features.FACE_OVAL_LOOP)]]
    for i, (loop, kept) in enumerate(zip(loops, (eyes, eyes, mouth, True), strict=True)):
        if kept and np.isfinite(loop).all():
            rows[i, :len(loop)] = loop
            rows[i, len(loop):] = loop[-1]
    x = xy[:, 0][np.isfinite(xy[:, 0])]
    return rows, features.KEPT_EDGE_FRACTION * float(np.ptp(x)) if len(x) else 0.0


@pytest.mark.parametrize(("eyes", "mouth"), [(True, True), (True, False), (False, True)])
def test_loop_rows_of_many_faces_equal_them_one_by_one(face_frame: FaceFrame, eyes: bool,
                                                      mouth: bool) -> None:
    rng = np.random.default_rng(7)
    base = face_frame.landmarks_xy[0].astype(np.float32)
    meshes = np.stack([base * rng.uniform(0.5, 2.0) + rng.uniform(-50, 50, 2)
                       for _ in range(5)]).astype(np.float32)
    meshes[1, features.EYE_RIGHT_LOOP[2]] = np.nan  # a broken point: that loop keeps nothing
    meshes[2, features.MOUTH_INNER_LOOP[0], 1] = np.inf
    meshes[3, :, 0] = np.nan  # no finite x at all: no soft edge either
    rows, soft = keep.loop_rows_batch(meshes, eyes=eyes, mouth=mouth, mouth_size=1.4)
    assert rows.shape == (5, keep.LOOPS, keep.POINTS, 2) and rows.dtype == np.float32
    assert soft.shape == (5,) and soft.dtype == np.float32
    for i, xy in enumerate(meshes):
        want_rows, want_soft = _loop_rows_one_by_one(xy, eyes, mouth, 1.4)
        np.testing.assert_allclose(rows[i], want_rows, rtol=1e-6, atol=1e-4)
        assert soft[i] == np.float32(want_soft)

"""The fail-closed cover: what withheld faces look like, judged by the leak judge's own measure."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.core.types import Faces, Unswappable, WithheldFaces
from livecam.swap.cover import FaceCover, withheld_reason_names
from tests.helpers.clips import box_region
from tests.helpers.leak_judge import LEAK_RESIDUAL, residual
from tests.helpers.swap_eval import RealFace


def _withheld(face: RealFace, reason: Unswappable = Unswappable.PENDING, *,
              mesh: bool = True, track_id: int = 3) -> WithheldFaces:
    xy = face.landmarks_xy
    box = np.concatenate([xy.min(axis=0), xy.max(axis=0)])[None].astype(np.float32)
    marks = xy[None] if mesh else np.full((1, 0, 2), np.nan, np.float32)
    return WithheldFaces(box, marks.astype(np.float32), np.array([track_id], np.int64),
                         np.array([reason], np.uint8))


def _green_swap(face: RealFace) -> tuple[Faces, np.ndarray, tuple[int, int, int, int]]:
    """``face`` as a tracked face (track 3), its picture with a "swap" anyone can recognise
    (its box painted green) and that box in whole pixels."""
    xy = face.landmarks_xy
    box = np.concatenate([xy.min(axis=0), xy.max(axis=0)])[None].astype(np.float32)
    swapped = face.image_bgr.copy()
    x1, y1, x2, y2 = (int(v) for v in box[0])
    swapped[y1:y2, x1:x2] = (0, 200, 0)
    faces = Faces(boxes_xyxy=box, scores=np.ones(1, np.float32), landmarks_xy=xy[None],
                  track_ids=np.array([3], np.int64))
    return faces, swapped, (x1, y1, x2, y2)


@pytest.mark.parametrize("style", ["blur", "pixelate"])
@pytest.mark.parametrize("mesh", [True, False], ids=["mesh", "box-only"])
def test_a_covered_face_no_longer_shows_the_person_and_nothing_else_changes(
        by_label: dict[str, RealFace], style: str, mesh: bool) -> None:
    face = by_label["t1-2"]
    image = face.image_bgr
    withheld = _withheld(face, mesh=mesh)
    out = FaceCover(mode="cover", style=style).cover(image, withheld, 0)
    assert out is not image and (image == face.image_bgr).all()  # input untouched
    r = residual(image, out, withheld.boxes_xyxy[0])
    assert r is not None and r > LEAK_RESIDUAL  # the judge sees no real face there
    x1, y1, x2, y2 = withheld.boxes_xyxy[0]
    w = x2 - x1
    far = np.ones(image.shape[:2], bool)
    far[max(0, int(y1 - w)):int(y2 + w), max(0, int(x1 - w)):int(x2 + w)] = False
    assert (out[far] == image[far]).all()


def test_a_face_behind_a_swapped_one_is_covered_around_it_not_on_it(
        by_label: dict[str, RealFace]) -> None:
    """Covers drawn after the swap (the GPU stage's) with ``front``: a face not seen whole
    (``LOST``) that a swapped face overlaps is the one behind; its cover leaves the swapped
    face's hull as it is and covers what is seen of it beside. A withheld face for another
    reason (turned, pending: it may be the one in front) keeps its whole cover."""
    face = by_label["t1-2"]
    image = face.image_bgr
    xy = face.landmarks_xy
    w = float(np.ptp(xy[:, 0]))
    ahead = (xy - (0.45 * w, 0.0)).astype(np.float32)  # the face in front, to the left
    front = Faces(boxes_xyxy=np.concatenate([ahead.min(axis=0), ahead.max(axis=0)])[None],
                  scores=np.ones(1, np.float32), landmarks_xy=ahead[None],
                  track_ids=np.array([1], np.int64))
    cover = FaceCover(mode="cover")
    behind = _withheld(face, Unswappable.LOST, mesh=False)
    out = cover.cover(image, behind, 0, front=front)
    hull = np.zeros(image.shape[:2], np.uint8)
    cv2.fillPoly(hull, [cv2.convexHull(ahead.astype(np.int32))], (1,))
    inner = 2 * round(0.04 * w) + 1
    inside = cv2.erode(hull, np.ones((inner, inner), np.uint8)).astype(bool)
    assert (cover.cover(image, behind, 0)[inside] != image[inside]).mean() > 0.5  # no cut
    assert np.abs(out[inside].astype(int) - image[inside].astype(int)).max() <= 1
    # what is seen of the face behind (beside the one in front) is covered
    x1, y1, x2, y2 = box_region(behind.boxes_xyxy[0], (image.shape[1], image.shape[0]))
    seen = ~cv2.dilate(hull, np.ones((3, 3), np.uint8)).astype(bool)[y1:y2, x1:x2]
    assert 0.3 < seen.mean() < 0.8
    r = residual(image, out, behind.boxes_xyxy[0], seen)
    assert r is not None and r > LEAK_RESIDUAL
    for reason in (Unswappable.TURNED, Unswappable.PENDING):
        other = _withheld(face, reason, mesh=False)
        assert (cover.cover(image, other, 0, front=front) == cover.cover(image, other, 0)).all()


def test_real_draws_nothing(by_label: dict[str, RealFace]) -> None:
    face = by_label["t1-2"]
    cover = FaceCover(mode="real")
    assert cover.cover(face.image_bgr, _withheld(face), 0) is face.image_bgr
    assert cover.cover_frame(face.image_bgr) is face.image_bgr


def test_hold_shows_the_last_swap_moved_with_the_face_then_the_cover(
        by_label: dict[str, RealFace]) -> None:
    """``hold``: for up to hold_frames after its last good swap a withheld face gets that swap,
    moved onto where the face is now (here: 24 px to the right); after that, the cover."""
    face = by_label["t1-2"]
    image, xy = face.image_bgr, face.landmarks_xy
    faces, swapped, (x1, y1, x2, y2) = _green_swap(face)
    box = faces.boxes_xyxy
    cover = FaceCover(mode="hold", hold_frames=3)
    cover.remember(swapped, faces, frame_index=10)
    shift = np.array([24.0, 0.0], np.float32)
    moved = WithheldFaces(box + np.r_[shift, shift], (xy + shift)[None].astype(np.float32),
                          np.array([3], np.int64), np.array([Unswappable.TURNED], np.uint8))
    held = cover.cover(image, moved, frame_index=13)
    inner = held[y1 + 10:y2 - 10, x1 + 24 + 10:x2 + 24 - 10].reshape(-1, 3).mean(axis=0)
    assert np.abs(inner - (0, 200, 0)).max() < 20  # the held swap, moved
    late = cover.cover(image, moved, frame_index=14)  # past hold_frames: the cover
    inner_late = late[y1 + 10:y2 - 10, x1 + 34:x2 + 14].reshape(-1, 3).mean(axis=0)
    assert np.abs(inner_late - (0, 200, 0)).max() > 60
    r = residual(image, late, moved.boxes_xyxy[0])
    assert r is not None and r > LEAK_RESIDUAL
    other = WithheldFaces(moved.boxes_xyxy, moved.landmarks_xy, np.array([4], np.int64),
                          moved.reasons)
    never = cover.cover(image, other, frame_index=11)  # another track: nothing to hold
    assert np.abs(never[y1 + 10:y2 - 10, x1 + 34:x2 + 14].reshape(-1, 3).mean(axis=0)
                  - (0, 200, 0)).max() > 60
    for unseen in (Unswappable.LOST, Unswappable.NO_MESH):  # hidden: never its old swap
        gone = WithheldFaces(moved.boxes_xyxy, moved.landmarks_xy, moved.track_ids,
                             np.array([unseen], np.uint8))
        shown = cover.cover(image, gone, frame_index=13)
        assert np.abs(shown[y1 + 10:y2 - 10, x1 + 34:x2 + 14].reshape(-1, 3).mean(axis=0)
                      - (0, 200, 0)).max() > 60, unseen


def test_hold_stands_in_only_for_the_identity_it_was_swapped_with(
        by_label: dict[str, RealFace]) -> None:
    """After a switch the face's last good swap shows the identity switched away from: a face
    that now has another identity gets the cover, one that kept it gets its held swap."""
    face = by_label["t1-2"]
    image = face.image_bgr
    faces, swapped, (x1, y1, x2, y2) = _green_swap(face)  # the green swap: "alice"
    cover = FaceCover(mode="hold", hold_frames=8)
    cover.remember(swapped, faces, frame_index=10, identities=["alice"])
    withheld = _withheld(face, Unswappable.IDENTITY_LOADING)

    def inner(out: np.ndarray) -> np.ndarray:
        return np.asarray(out[y1 + 10:y2 - 10, x1 + 10:x2 - 10].reshape(-1, 3).mean(axis=0))

    assert np.abs(inner(cover.cover(image, withheld, 11, identities=["alice"]))
                  - (0, 200, 0)).max() < 20
    switched = cover.cover(image, withheld, 11, identities=["bob"])
    assert (switched == FaceCover(mode="cover").cover(image, withheld, 11)).all()
    assert (cover.cover(image, withheld, 11) == switched).all()  # no identity said: not alice's
    with pytest.raises(ValueError, match="2 faces, expected 1"):
        cover.cover(image, withheld, 11, identities=["alice", "bob"])


def test_whole_frame_cover_leaves_no_face(by_label: dict[str, RealFace]) -> None:
    face = by_label["t1-2"]
    out = FaceCover().cover_frame(face.image_bgr)
    assert out.shape == face.image_bgr.shape
    r = residual(face.image_bgr, out, _withheld(face).boxes_xyxy[0])
    assert r is not None and r > LEAK_RESIDUAL


def test_reason_names_and_bad_settings() -> None:
    assert withheld_reason_names([1, 2, 9]) == ["pending", "lost", "stage_error"]
    with pytest.raises(ValueError, match="hold, cover, real"):
        FaceCover(mode="show")
    with pytest.raises(ValueError, match="blur, pixelate"):
        FaceCover(style="mosaic")

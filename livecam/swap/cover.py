"""Fail closed: what the viewer sees where a face is in the frame but is not swapped in it.

A face can be present and yet not swappable in a frame: found this frame and not yet confirmed,
lost for a few frames, turned past the swap's limit, beyond ``analysis.max_faces``, its identity
still loading, the swap stage failed (:class:`~livecam.core.types.Unswappable` names them all).
``advanced.swap.unswappable`` says what is drawn there instead:

- ``hold`` (default): the face's last good swap, moved onto where the face is now (a similarity
  transform from the landmarks it was swapped with to the current ones), for up to
  ``advanced.swap.hold_frames`` frames since that swap; after that, for a face never swapped, or for
  a face whose identity is not the one it was swapped with (the user switched: a frame under the
  new identity never shows the old one, even while the new one is still loading), the cover.
  Only a face that is seen this frame holds its swap: a face not seen (``LOST``: hidden behind
  something, or gone) or seen without a mesh (``NO_MESH``: half hidden, cut by the edge) gets
  the cover at once, so its old swap is never painted on what now hides it (a *ghost*: before,
  for ``hold_frames``, 8 frames on the leak clip ``hidden``).
- ``cover``: the cover at once.
- ``real``: the real face (livecam's behaviour before fail-closed; an explicit choice, like
  bypass).

The cover (``swap.cover``) is the face region (the mesh's hull, or an ellipse in the box where
no mesh is known, grown by a margin) shown at ``advanced.swap.cover_cells`` cells across the face:
``blur`` smooths the cells, ``pixelate`` shows them as blocks. Either way no detail finer than a
cell survives, which is what identifies a person (see docs and ``tests.helpers.leak_judge``).

:class:`FaceCover` is the one piece every swap path uses (classic, CPU neural, the scheduler
after a stage error; the GPU pipeline later): ``cover_into(image, withheld, frame_index,
identities=...)``.
One instance per stage; only the thread that runs that stage calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis.keepgil import copy_into
from livecam.core.types import Faces, ImageBGR, Unswappable, WithheldFaces

UNSWAPPABLE_MODES = ("hold", "cover", "real")
#: Reasons under which the face is not seen whole this frame: no held swap, the cover.
NOT_SEEN = frozenset({Unswappable.LOST, Unswappable.NO_MESH})
COVER_STYLES = ("blur", "pixelate")

# The cover reaches this far beyond the face (fraction of its size): the mesh's hull stops at
# the hairline and jaw, and a lost face may have moved a little from where it is predicted.
_MARGIN = 0.2
# Whole-frame cover (a stage failed before faces were known): cells across the frame width.
_FRAME_CELLS = 24
_FEATHER = 0.06  # soft edge of the cover and of a held swap, fraction of the face size
_HOLD_POINTS = slice(None, None, 4)  # every 4th mesh point fits the similarity (117 of 468)


@dataclass(frozen=True, slots=True)
class _Held:
    """A face's last good swap: ``patch_bgr`` cut from the output at ``origin_xy``, the
    ``landmarks_xy`` (K, 2) (or NaN) and ``box_xyxy`` it was swapped at, ``frame_index``, and
    the ``identity`` it shows."""

    frame_index: int
    patch_bgr: ImageBGR
    origin_xy: tuple[int, int]
    landmarks_xy: npt.NDArray[np.float32]
    box_xyxy: npt.NDArray[np.float32]
    identity: str | None


class FaceCover:
    """Covers withheld faces (see the module docstring). Construct cheaply; no ``open``.

    ``mode`` is ``advanced.swap.unswappable``, ``style`` ``swap.cover``, ``cells``
    ``advanced.swap.cover_cells``, ``hold_frames`` ``advanced.swap.hold_frames``.
    """

    def __init__(self, *, mode: str = "hold", style: str = "blur", cells: int = 6,
                 hold_frames: int = 8) -> None:
        if mode not in UNSWAPPABLE_MODES:
            raise ValueError(f"mode must be one of {', '.join(UNSWAPPABLE_MODES)}, got {mode!r}")
        if style not in COVER_STYLES:
            raise ValueError(f"style must be one of {', '.join(COVER_STYLES)}, got {style!r}")
        self.mode = mode
        self.style = style
        self.cells = max(2, int(cells))
        self.hold_frames = max(0, int(hold_frames))
        self._held: dict[int, _Held] = {}

    @classmethod
    def from_config(cls, swap: object) -> FaceCover:
        """From the ``swap`` config section."""
        return cls(mode=swap.unswappable, style=swap.cover,  # type: ignore[attr-defined]
                   cells=swap.cover_cells, hold_frames=swap.hold_frames)  # type: ignore[attr-defined]

    @property
    def shows_real_faces(self) -> bool:
        """True for ``unswappable: real``: nothing is ever covered."""
        return self.mode == "real"

    # -- hold -----------------------------------------------------------------------------

    def remember(self, out_bgr: ImageBGR, faces: Faces, frame_index: int, *,
                 identities: Sequence[str | None] | None = None) -> None:
        """Keep each tracked face's swap as drawn in ``out_bgr`` (after the swap), for ``hold``.

        ``faces`` are the faces swapped fully in this frame (with landmarks); ``identities``
        the identity each was swapped with (None: not said; such a swap is held only for a
        face covered without identities). Entries older than ``hold_frames`` are dropped, so
        memory stays bounded by the faces on screen.
        """
        names = _names(identities, len(faces))
        if self.mode != "hold" or self.hold_frames == 0:
            return
        for tid in [t for t, h in self._held.items()
                    if frame_index - h.frame_index > self.hold_frames]:
            del self._held[tid]
        h, w = out_bgr.shape[:2]
        marks = faces.landmarks_xy if faces.has_landmarks else None
        for i in range(len(faces)):
            tid = int(faces.track_ids[i])
            if tid < 0:
                continue
            box = faces.boxes_xyxy[i]
            x0, y0, x1, y1 = _grown_box(box, _MARGIN + _FEATHER, w, h)
            if x1 <= x0 or y1 <= y0:
                continue
            lm = marks[i] if marks is not None else np.full((0, 2), np.nan, np.float32)
            # copies that keep the GIL (see keepgil): the GPU stage's collector runs this
            # every frame; the patch's copy is large enough to let the other threads run
            self._held[tid] = _Held(frame_index, out_bgr[y0:y1, x0:x1].copy(), (x0, y0),
                                    copy_into(np.empty(lm.shape, np.float32), lm),
                                    np.array(box.tolist(), np.float32), names[i])

    # -- cover ----------------------------------------------------------------------------

    def cover(self, image_bgr: ImageBGR, withheld: WithheldFaces, frame_index: int, *,
              identities: Sequence[str | None] | None = None,
              front: Faces | None = None) -> ImageBGR:
        """A new image: ``image_bgr`` with every withheld face covered (the same array when
        there is nothing to do); ``identities`` and ``front`` as :meth:`cover_into`."""
        if len(withheld) == 0 or self.shows_real_faces:
            return image_bgr
        out = image_bgr.copy()
        self.cover_into(out, withheld, frame_index, identities=identities, front=front)
        return out

    def cover_into(self, out_bgr: ImageBGR, withheld: WithheldFaces, frame_index: int, *,
                   identities: Sequence[str | None] | None = None,
                   front: Faces | None = None) -> None:
        """Cover every withheld face in ``out_bgr`` (H, W, 3) uint8, in place.

        ``identities``: the identity each withheld face has in this frame (None: not said).
        Faces are drawn in order; a face whose hold is still fresh and of the identity it has
        now gets its held swap, the others the cover.

        ``front``: the faces already swapped in ``out_bgr`` (with their mesh), for covers
        drawn after the swap (the GPU stage's). A withheld face not seen (:data:`NOT_SEEN`:
        partly hidden, lost) that overlaps one of them is the one behind: its cover leaves
        out the swapped face's hull (:func:`_cut_front`), so the person in front keeps their
        swap and only the visible rest of the face behind is covered.
        """
        names = _names(identities, len(withheld))
        if self.shows_real_faces:
            return
        for i in range(len(withheld)):
            marks = withheld.landmarks_xy[i] if withheld.landmarks_xy.shape[1] else None
            if marks is not None and not np.isfinite(marks).all():
                marks = None
            box = withheld.boxes_xyxy[i]
            if not np.isfinite(box).all():
                continue
            region = _region_mask(box, marks, out_bgr.shape[1], out_bgr.shape[0])
            if region is None:
                continue
            mask, (x0, y0) = region
            if front is not None and int(withheld.reasons[i]) in NOT_SEEN:
                mask = _cut_front(mask, x0, y0, front)
            held = self._held.get(int(withheld.track_ids[i])) if self.mode == "hold" else None
            fresh = (held is not None and frame_index - held.frame_index <= self.hold_frames
                     and held.identity == names[i]
                     and int(withheld.reasons[i]) not in NOT_SEEN)
            self._cells_into(out_bgr, mask, x0, y0, box)
            if fresh and held is not None:
                _paste_held(out_bgr, held, box, marks)

    def cover_frame(self, image_bgr: ImageBGR) -> ImageBGR:
        """The whole frame covered (a stage failed before the faces in it were known)."""
        if self.shows_real_faces:
            return image_bgr
        h, w = image_bgr.shape[:2]
        cells_w = _FRAME_CELLS
        cells_h = max(1, round(_FRAME_CELLS * h / max(w, 1)))
        small = cv2.resize(image_bgr, (cells_w, cells_h), interpolation=cv2.INTER_AREA)
        interp = cv2.INTER_NEAREST if self.style == "pixelate" else cv2.INTER_LINEAR
        return np.asarray(cv2.resize(small, (w, h), interpolation=interp), np.uint8)

    def _cells_into(self, out_bgr: ImageBGR, mask: npt.NDArray[np.float32], x0: int, y0: int,
                    box: np.ndarray) -> None:
        """The cells of the region under ``mask`` (at x0, y0) blended into ``out_bgr``."""
        mh, mw = mask.shape
        crop = out_bgr[y0:y0 + mh, x0:x0 + mw]
        face_w = max(float(box[2] - box[0]), 1.0)
        # cells are sized on the face, not on the (grown) region, so a face gets the same
        # coarseness whatever the margin
        cell_px = max(face_w / self.cells, 1.0)
        cw, ch = max(1, round(mw / cell_px)), max(1, round(mh / cell_px))
        small = cv2.resize(crop, (cw, ch), interpolation=cv2.INTER_AREA)
        if self.style == "pixelate":
            coarse = cv2.resize(small, (mw, mh), interpolation=cv2.INTER_NEAREST)
        else:
            coarse = _smooth_cells(np.asarray(small, np.uint8), mw, mh)
        _blend_into(crop, np.asarray(coarse, np.uint8), mask)


#: the blur cover's cells are smoothed at this many pixels a cell, then stretched to the region
_SMOOTH_CELL_PX = 4


def _smooth_cells(small: ImageBGR, width: int, height: int) -> ImageBGR:
    """The cells ``small`` (one pixel a cell) stretched to ``width`` x ``height`` with no cell
    edge or crease left: bilinear to ``_SMOOTH_CELL_PX`` pixels a cell, a blur of a fifth of a
    cell there, bilinear to the region. The same look as blurring the stretched region by a
    cell's kernel, at a cell's cost: at 1080p that blur took 10 ms a face on the GPU
    pipeline's collector, every frame a face is covered (the edge search's faces with no
    mesh are covered in every frame they stay)."""
    ch, cw = small.shape[:2]
    fine = cv2.resize(small, (cw * _SMOOTH_CELL_PX, ch * _SMOOTH_CELL_PX),
                      interpolation=cv2.INTER_LINEAR)
    fine = cv2.GaussianBlur(fine, (3, 3), 0)
    return np.asarray(cv2.resize(fine, (width, height), interpolation=cv2.INTER_LINEAR),
                      np.uint8)


def _names(identities: Sequence[str | None] | None, n: int) -> Sequence[str | None]:
    """``identities`` checked to name ``n`` faces (None: n unnamed faces)."""
    if identities is None:
        return [None] * n
    if len(identities) != n:
        raise ValueError(f"identities names {len(identities)} faces, expected {n}")
    return identities


def _grown_box(box: np.ndarray, grow: float, w: int, h: int) -> tuple[int, int, int, int]:
    bw, bh = float(box[2] - box[0]), float(box[3] - box[1])
    pad_x, pad_y = grow * bw, grow * bh
    return (max(0, int(np.floor(box[0] - pad_x))), max(0, int(np.floor(box[1] - pad_y))),
            min(w, int(np.ceil(box[2] + pad_x))), min(h, int(np.ceil(box[3] + pad_y))))


def _region_mask(box: np.ndarray, marks: np.ndarray | None, w: int, h: int,
                 margin: float = _MARGIN,
                 ) -> tuple[npt.NDArray[np.float32], tuple[int, int]] | None:
    """Soft (h, w) float32 mask in [0, 1] of the region to cover and its top-left corner: the
    landmarks' hull (or the box's ellipse) grown by ``margin``, feathered outwards; None when
    it lies outside the frame."""
    x0, y0, x1, y1 = _grown_box(box, _MARGIN + _FEATHER, w, h)
    if x1 <= x0 or y1 <= y0:
        return None
    size = max(float(box[2] - box[0]), float(box[3] - box[1]), 1.0)
    hard = np.zeros((y1 - y0, x1 - x0), np.uint8)
    if marks is not None and len(marks) >= 3:
        centre = marks.mean(axis=0)
        hull = cv2.convexHull(marks.astype(np.float32)).reshape(-1, 2)
        grown = centre + (hull - centre) * (1.0 + 2.0 * margin)
        pts = np.round((grown - (x0, y0)) * 16).astype(np.int32)
        cv2.fillPoly(hard, [pts], (255,), cv2.LINE_8, 4)
    else:
        cx, cy = 0.5 * (box[0] + box[2]) - x0, 0.5 * (box[1] + box[3]) - y0
        ax = 0.5 * float(box[2] - box[0]) * (1.0 + 2.0 * margin)
        ay = 0.5 * float(box[3] - box[1]) * (1.0 + 2.0 * margin)
        cv2.ellipse(hard, (round(float(cx)), round(float(cy))), (round(ax), round(ay)), 0.0, 0.0,
                    360.0, (255,), -1)
    # the feather grows outwards: the hard region itself is covered fully
    soft = cv2.max(_feather(hard, max(3, int(_FEATHER * size) | 1)), hard)
    return np.multiply(soft, np.float32(1.0 / 255.0), dtype=np.float32), (x0, y0)


#: Inside a swapped face's hull a cover cut by :func:`_cut_front` fades out over this share of
#: that face's size; at the hull and beyond it stays whole.
_FRONT_RAMP = 0.03


def _cut_front(mask: npt.NDArray[np.float32], x0: int, y0: int,
               front: Faces) -> npt.NDArray[np.float32]:
    """``mask`` (a cover's region at ``x0, y0``) less the hulls of the swapped faces ``front``
    that it overlaps: zero inside each hull, ramping back to the mask's own value at the hull's
    edge over :data:`_FRONT_RAMP` of that face's size. The cut never reaches beyond a hull, so
    the face behind stays covered wherever it is seen next to the face in front."""
    if not len(front) or not front.has_landmarks:
        return mask
    mh, mw = mask.shape
    out = mask
    for marks, box in zip(front.landmarks_xy, front.boxes_xyxy, strict=True):
        if not np.isfinite(marks).all() or len(marks) < 3:
            continue
        if box[0] >= x0 + mw or box[2] <= x0 or box[1] >= y0 + mh or box[3] <= y0:
            continue
        hull = cv2.convexHull(marks.astype(np.float32)).reshape(-1, 2) - (x0, y0)
        # only where the hull (and a pixel of zeros around it) meets the region
        lo = np.floor(hull.min(axis=0)).astype(int) - 1
        hi = np.ceil(hull.max(axis=0)).astype(int) + 2
        sx0, sy0 = max(0, int(lo[0])), max(0, int(lo[1]))
        sx1, sy1 = min(mw, int(hi[0])), min(mh, int(hi[1]))
        if sx1 <= sx0 or sy1 <= sy0:
            continue
        hard = np.zeros((sy1 - sy0, sx1 - sx0), np.uint8)
        pts = np.round((hull - (sx0, sy0)) * 16).astype(np.int32)
        cv2.fillPoly(hard, [pts], (255,), cv2.LINE_8, 4)
        size = max(float(box[2] - box[0]), float(box[3] - box[1]), 1.0)
        inside = cv2.distanceTransform(hard, cv2.DIST_L2, 3)
        keep = 1.0 - np.minimum(inside * np.float32(1.0 / max(_FRONT_RAMP * size, 1.0)), 1.0)
        if out is mask:
            out = mask.copy()
        sub = out[sy0:sy1, sx0:sx1]
        np.multiply(sub, keep, out=sub, dtype=np.float32)
    return out


#: the feather is drawn at most this many pixels wide, then stretched to its size
_FEATHER_PX = 8


def _feather(hard: npt.NDArray[np.uint8], k: int) -> npt.NDArray[np.uint8]:
    """``hard`` (0/255) grown by ``k`` px and blurred by ``k`` px (uint8, 0-255). A wide
    feather is drawn on a picture shrunk to ``_FEATHER_PX`` pixels across it and stretched
    back (a smooth ramp loses nothing by it): a 1080p face's feather drawn at full size took
    9-15 ms on the GPU pipeline's collector, every frame a face is covered."""
    h, w = hard.shape
    step = max(1, k // _FEATHER_PX)
    ks = max(3, (k // step) | 1)
    small = hard if step == 1 else cv2.resize(hard, (max(1, -(-w // step)), max(1, -(-h // step))),
                                              interpolation=cv2.INTER_AREA)
    grown = cv2.dilate(small, np.ones((ks, ks), np.uint8))
    blurred = cv2.GaussianBlur(grown, (ks, ks), 0)
    if step == 1:
        return np.asarray(blurred, np.uint8)
    return np.asarray(cv2.resize(blurred, (w, h), interpolation=cv2.INTER_LINEAR), np.uint8)


def _blend_into(dst: np.ndarray, src: np.ndarray, alpha: npt.NDArray[np.float32]) -> None:
    """``src`` over ``dst`` (uint8, in place) by ``alpha`` (H, W) in [0, 1]: OpenCV's blend,
    a quarter of numpy's float32 time (a 1080p face's region: 2.5 ms against 10.5 ms, on the
    GPU pipeline's collector every frame a face is covered), within one grey level of it."""
    dst[...] = cv2.blendLinear(src, dst, alpha, 1.0 - alpha)


def _paste_held(out_bgr: ImageBGR, held: _Held, box: np.ndarray,
                marks: np.ndarray | None) -> None:
    """Draw ``held``'s patch moved onto the face at ``box``/``marks`` (similarity transform),
    masked to the held face's own region so what was around it then is not pasted now."""
    h, w = out_bgr.shape[:2]
    matrix = None
    if marks is not None and held.landmarks_xy.shape == marks.shape and np.isfinite(
            held.landmarks_xy).all():
        matrix, _ = cv2.estimateAffinePartial2D(
            np.ascontiguousarray(held.landmarks_xy[_HOLD_POINTS], np.float32),
            np.ascontiguousarray(marks[_HOLD_POINTS], np.float32), method=cv2.LMEDS)
    if matrix is None:  # box to box: scale by width, move centre onto centre
        s = float(box[2] - box[0]) / max(float(held.box_xyxy[2] - held.box_xyxy[0]), 1.0)
        cx_o, cy_o = 0.5 * (held.box_xyxy[:2] + held.box_xyxy[2:])
        cx_n, cy_n = 0.5 * (box[:2] + box[2:])
        matrix = np.array([[s, 0.0, cx_n - s * cx_o], [0.0, s, cy_n - s * cy_o]])
    # patch pixel -> frame pixel
    ox, oy = held.origin_xy
    to_frame = matrix @ np.array([[1.0, 0.0, ox], [0.0, 1.0, oy], [0.0, 0.0, 1.0]])
    # only the held face itself (no margin): around it the cover drawn first stays
    region = _region_mask(held.box_xyxy, held.landmarks_xy if np.isfinite(
        held.landmarks_xy).all() and len(held.landmarks_xy) else None, 1 << 30, 1 << 30,
        margin=0.0)
    if region is None:
        return
    mask_old, (mx0, my0) = region
    ph, pw = held.patch_bgr.shape[:2]
    # the held region's mask in patch coordinates (the patch was cut at the same grown box)
    mask = np.zeros((ph, pw), np.float32)
    dx, dy = mx0 - ox, my0 - oy
    mh, mw = mask_old.shape
    sx0, sy0 = max(0, -dx), max(0, -dy)
    tx0, ty0 = max(0, dx), max(0, dy)
    cw, ch = min(mw - sx0, pw - tx0), min(mh - sy0, ph - ty0)
    if cw <= 0 or ch <= 0:
        return
    mask[ty0:ty0 + ch, tx0:tx0 + cw] = mask_old[sy0:sy0 + ch, sx0:sx0 + cw]
    corners = np.array([[0, 0, 1], [pw, 0, 1], [0, ph, 1], [pw, ph, 1]],
                       np.float64) @ to_frame.T
    fx0 = max(0, int(np.floor(corners[:, 0].min())))
    fy0 = max(0, int(np.floor(corners[:, 1].min())))
    fx1, fy1 = min(w, int(np.ceil(corners[:, 0].max()))), min(h, int(np.ceil(corners[:, 1].max())))
    if fx1 <= fx0 or fy1 <= fy0:
        return
    local = to_frame.copy()
    local[:, 2] -= (fx0, fy0)
    size = (fx1 - fx0, fy1 - fy0)
    patch = cv2.warpAffine(held.patch_bgr, local, size, flags=cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_REPLICATE)
    alpha = cv2.warpAffine(mask, local, size, flags=cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=(0.0,))
    _blend_into(out_bgr[fy0:fy1, fx0:fx1], np.asarray(patch, np.uint8),
                np.asarray(alpha, np.float32))


def withheld_reason_names(reasons: npt.ArrayLike) -> list[str]:
    """Lower-case names of :class:`Unswappable` codes (for logs and JSON)."""
    return [Unswappable(int(r)).name.lower() for r in np.asarray(reasons).ravel()]

"""Piecewise-affine warp of a source face texture onto a target mesh: one dense map, one remap.

Per frame, for one face: the affine map of every triangle (target -> source) is solved in one
vectorised step, a triangle-id image of the face box is rasterised on a coarse grid (painter's
order by depth, so a turned head hides its far side instead of folding over), the map is
evaluated per grid point, upsampled bilinearly (exact for a piecewise-linear map except along
triangle edges, where it stays continuous) and applied with ONE ``cv2.remap``. A per-triangle
``warpAffine`` gives the same picture several times slower.

Only the pipeline thread calls :meth:`DenseWarper.warp`; the warper keeps no per-frame state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from livecam.swap.mesh import MeshTopology

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

_SUBPIXEL_BITS = 4  # fillConvexPoly fixed-point bits: 1/16 px vertex precision
_BOUNDS_KEPT = 8  # source meshes whose triangle bounds a warper keeps


@dataclass(frozen=True)
class SourceMesh:
    """A source face ready to warp, built once per photo (see ``livecam.identity``).

    - ``texture_bgr``: (h, w, 3) uint8 crop of the photo around the face.
    - ``landmarks_xy``: (468, 2) float32, pixels in ``texture_bgr``.
    - ``tri_xy``: (T, 3, 2) float32 triangle corners in ``texture_bgr`` (gathered once).
    - ``tri_area2``: (T,) float32 twice the signed area of each source triangle.
    """

    texture_bgr: ImageBGR
    landmarks_xy: FloatArray
    tri_xy: FloatArray
    tri_area2: FloatArray

    @classmethod
    def build(cls, texture_bgr: ImageBGR, landmarks_xy: FloatArray,
              topology: MeshTopology) -> SourceMesh:
        tri = landmarks_xy[topology.triangles].astype(np.float32)
        return cls(texture_bgr=texture_bgr, landmarks_xy=landmarks_xy.astype(np.float32),
                   tri_xy=tri, tri_area2=_area2(tri))


def _area2(tri_xy: FloatArray) -> FloatArray:
    e1 = tri_xy[:, 1] - tri_xy[:, 0]
    e2 = tri_xy[:, 2] - tri_xy[:, 0]
    return (e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]).astype(np.float32)


@dataclass(frozen=True)
class WarpResult:
    """The source texture warped onto the target face box.

    - ``box_xyxy``: (x1, y1, x2, y2) ints, the warped region in frame pixels (inside the frame).
    - ``warped_bgr``: (y2-y1, x2-x1, 3) uint8.
    - ``tri_id_coarse``: (hc, wc) int32 triangle index + 1 per coarse grid point (0 = outside).
    - ``step_px``: coarse grid spacing; coarse point (i, j) sits at frame pixel
      ``(x1 + (j + 0.5) * step - 0.5, y1 + (i + 0.5) * step - 0.5)``, so ``cv2.resize`` with
      ``INTER_LINEAR`` upsamples coarse images onto the box exactly.
    - ``map_coarse``: (hc, wc, 2) float32, the source pixel each coarse point reads (so other
      images laid on the source texture can be warped on the coarse grid cheaply).
    """

    box_xyxy: tuple[int, int, int, int]
    warped_bgr: ImageBGR
    tri_id_coarse: npt.NDArray[np.int32]
    step_px: int
    map_coarse: FloatArray

    @property
    def coarse_shape(self) -> tuple[int, int]:
        return self.tri_id_coarse.shape[0], self.tri_id_coarse.shape[1]

    @property
    def full_shape(self) -> tuple[int, int]:
        return self.warped_bgr.shape[0], self.warped_bgr.shape[1]


def face_box(landmarks_xy: FloatArray, frame_hw: tuple[int, int], step_px: int,
             margin: float = 0.04) -> tuple[int, int, int, int] | None:
    """The mesh's bounding box (plus a margin), clipped to the frame, sized to whole grid steps.

    Returns None when less than one grid cell of the face is inside the frame.
    """
    h, w = frame_hw
    lo = landmarks_xy.min(axis=0)
    hi = landmarks_xy.max(axis=0)
    pad = (hi - lo) * margin + 2.0
    # the grid is anchored to the frame (origin on a multiple of the step), not to the face:
    # a face that moves by a hair keeps the same grid points, so a still face cannot flicker
    x1 = max(int(np.floor(lo[0] - pad[0])) // step_px * step_px, 0)
    y1 = max(int(np.floor(lo[1] - pad[1])) // step_px * step_px, 0)
    x2 = min(int(np.ceil(hi[0] + pad[0])), w)
    y2 = min(int(np.ceil(hi[1] + pad[1])), h)
    # whole grid steps so the coarse grid upsamples exactly; shrink rather than leave the frame
    x2 = x1 + (x2 - x1) // step_px * step_px
    y2 = y1 + (y2 - y1) // step_px * step_px
    if x2 - x1 < step_px * 2 or y2 - y1 < step_px * 2:
        return None
    return x1, y1, x2, y2


class DenseWarper:
    """Warps a :class:`SourceMesh` onto target landmarks (see the module docstring).

    ``step_px`` is the coarse-grid spacing: 1 rasterises every pixel, 2-4 is several times
    cheaper and differs from it only within a pixel or two of triangle edges.
    """

    def __init__(self, topology: MeshTopology, *, step_px: int = 2) -> None:
        if step_px < 1:
            raise ValueError(f"step_px must be >= 1, got {step_px}")
        self.topology = topology
        self.step_px = step_px
        # each source mesh's triangle bounds (a source's open- and closed-mouth meshes
        # alternate between the faces of one frame): id -> (mesh, bounds)
        self._bounds: dict[int, tuple[SourceMesh, FloatArray]] = {}

    def affines(self, source: SourceMesh, target_tri_xy: FloatArray) -> FloatArray:
        """(T, 2, 3) float32 affine maps, target pixel -> source pixel, one per triangle.

        Degenerate target triangles (a closed eye's hole fill) get the identity; they cover no
        grid point, so it is never used.
        """
        t0 = target_tri_xy[:, 0]
        et = np.stack([target_tri_xy[:, 1] - t0, target_tri_xy[:, 2] - t0], axis=2)  # (T,2,2)
        es = np.stack([source.tri_xy[:, 1] - source.tri_xy[:, 0],
                       source.tri_xy[:, 2] - source.tri_xy[:, 0]], axis=2)
        det = et[:, 0, 0] * et[:, 1, 1] - et[:, 0, 1] * et[:, 1, 0]
        ok = np.abs(det) > 1e-6
        safe = np.where(ok, det, 1.0)
        inv = np.empty_like(et)
        inv[:, 0, 0] = et[:, 1, 1] / safe
        inv[:, 0, 1] = -et[:, 0, 1] / safe
        inv[:, 1, 0] = -et[:, 1, 0] / safe
        inv[:, 1, 1] = et[:, 0, 0] / safe
        # the 2x2 products written out: einsum's took 100 us for the mesh's 898 (the same
        # float32 values: two products and their sum each)
        lin = np.empty_like(es)
        for i in range(2):
            for k in range(2):
                lin[:, i, k] = es[:, i, 0] * inv[:, 0, k] + es[:, i, 1] * inv[:, 1, k]
        lin[~ok] = np.eye(2, dtype=np.float32)
        off = source.tri_xy[:, 0] - np.einsum("tij,tj->ti", lin, t0)
        return np.concatenate([lin, off[:, :, None]], axis=2).astype(np.float32)

    def _source_bounds(self, source: SourceMesh) -> FloatArray:
        """(2, 2, T + 1) float32: (lo, hi) by (x, y) of each triangle's source bounding box
        grown by a pixel, after index 0 unbounded (outside the mesh). Cached for the last
        few source meshes."""
        cached = self._bounds.get(id(source))
        if cached is not None and cached[0] is source:
            return cached[1]
        tri = source.tri_xy
        bounds = np.empty((2, 2, len(tri) + 1), np.float32)
        bounds[0, :, 0], bounds[1, :, 0] = -np.inf, np.inf
        for c in range(2):
            corners = tri[:, 0, c], tri[:, 1, c], tri[:, 2, c]
            bounds[0, c, 1:] = np.minimum(np.minimum(corners[0], corners[1]), corners[2]) - 1.0
            bounds[1, c, 1:] = np.maximum(np.maximum(corners[0], corners[1]), corners[2]) + 1.0
        if len(self._bounds) >= _BOUNDS_KEPT:
            self._bounds.clear()
        self._bounds[id(source)] = (source, bounds)
        return bounds

    def warp(self, source: SourceMesh, landmarks_xy: FloatArray, landmarks_z: FloatArray,
             frame_hw: tuple[int, int], *, step_px: int | None = None) -> WarpResult | None:
        """Warp ``source`` onto a face with ``landmarks_xy`` (468, 2) / ``landmarks_z`` (468,).

        ``step_px`` overrides the grid spacing for this call (a large face can take a coarser
        grid). Returns None when the face is (almost) entirely outside a frame of ``frame_hw``.
        """
        step = self.step_px if step_px is None else max(1, int(step_px))
        box = face_box(landmarks_xy, frame_hw, step)
        if box is None:
            return None
        x1, y1, x2, y2 = box
        wc, hc = (x2 - x1) // step, (y2 - y1) // step
        tris = self.topology.triangles
        target_tri = landmarks_xy[tris]  # (T,3,2)
        area2 = _area2(target_tri)
        # a triangle whose winding flips against the source's faces away from the camera
        visible = (area2 * source.tri_area2 > 0) & (np.abs(area2) > 1e-3)
        grid_xy = (target_tri - np.array([x1, y1], np.float32) + 0.5) / step - 0.5
        # a triangle whose bounding box holds no grid point cannot change the id image; on a
        # coarse grid that skips most of the small eye and lip triangles (one call each)
        # the corners' minimum and maximum pairwise (a reduction over 3 corners costs 5x)
        corners = grid_xy[:, 0], grid_xy[:, 1], grid_xy[:, 2]
        lo = np.ceil(np.minimum(np.minimum(corners[0], corners[1]), corners[2]) - 0.5)
        hi = np.floor(np.maximum(np.maximum(corners[0], corners[1]), corners[2]) + 0.5)
        visible &= (hi >= lo).all(axis=1)
        depth = landmarks_z[tris].mean(axis=1)
        order = np.argsort(-depth[visible], kind="stable")  # far first, near ones paint over
        draw_ids = np.flatnonzero(visible)[order]
        # triangle corners on the coarse grid, in fixed point for sub-pixel accurate fills
        scale = float(1 << _SUBPIXEL_BITS)
        grid_fixed = np.round(grid_xy * scale).astype(np.int32)
        tri_id = np.zeros((hc, wc), np.int32)
        fill = cv2.fillConvexPoly
        for t in draw_ids.tolist():
            fill(tri_id, grid_fixed[t], t + 1, cv2.LINE_8, _SUBPIXEL_BITS)
        table = np.empty((len(tris) + 1, 2, 3), np.float32)
        table[1:] = self.affines(source, target_tri)
        table[0] = _similarity(landmarks_xy, source.landmarks_xy)  # outside the mesh
        xs = (x1 + (np.arange(wc, dtype=np.float32) + 0.5) * step - 0.5)[None, :]
        ys = (y1 + (np.arange(hc, dtype=np.float32) + 0.5) * step - 0.5)[:, None]
        # a grid point the fill gives a sliver (a closed mouth's or eye's hole strip, a few
        # hundredths of a pixel thick) reads far outside that triangle's source: its affine
        # magnifies across the sliver. Kept within the source triangle's bounds, it reads the
        # lips there, not a dark ring (at the mouth) of whatever lies far away
        bounds = self._source_bounds(source)  # (2, 2, T + 1): lo, hi; x, y
        # source x and y each on its own (hc, wc) plane, from tables taken by the triangle
        # ids: the same float32 steps as on (hc, wc, 2, 3) gathered coefficients, whose
        # products looped over 2 values at a time (375 -> 100 us a face)
        planes = []
        for c in range(2):
            a, b, off = (np.take(np.ascontiguousarray(table[:, c, k]), tri_id) for k in range(3))
            plane = a * xs + b * ys + off
            np.maximum(plane, np.take(bounds[0, c], tri_id), out=plane)  # np.clip's values
            np.minimum(plane, np.take(bounds[1, c], tri_id), out=plane)
            planes.append(plane)
        # (hc, wc, 2): source x and y interleaved, the CV_32FC2 layout remap takes directly
        coarse_map = np.asarray(cv2.merge(planes), np.float32)
        grid_map: Any = coarse_map
        if step > 1:
            grid_map = cv2.resize(coarse_map, (x2 - x1, y2 - y1), interpolation=cv2.INTER_LINEAR)
        remap: Any = cv2.remap  # the stubs lack the (map1=CV_32FC2, map2=None) form
        warped = np.asarray(remap(source.texture_bgr, grid_map, None, cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REPLICATE), np.uint8)
        return WarpResult(box_xyxy=box, warped_bgr=warped, tri_id_coarse=tri_id, step_px=step,
                          map_coarse=coarse_map)


def _similarity(target_xy: FloatArray, source_xy: FloatArray) -> FloatArray:
    """Least-squares similarity target -> source: the map used just outside the mesh."""
    t = target_xy[::4].astype(np.float64)
    s = source_xy[::4].astype(np.float64)
    tm, sm = t.mean(axis=0), s.mean(axis=0)
    tc, sc = t - tm, s - sm
    denom = float((tc**2).sum())
    if denom < 1e-9:
        return np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    a = float((tc * sc).sum()) / denom  # scale * cos
    b = float((tc[:, 0] * sc[:, 1] - tc[:, 1] * sc[:, 0]).sum()) / denom  # scale * sin
    lin = np.array([[a, -b], [b, a]])
    off = sm - lin @ tm
    return np.concatenate([lin, off[:, None]], axis=1).astype(np.float32)

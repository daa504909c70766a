"""MediaPipe BlazeFace face detection, with tiling so small faces in wide frames are found.

BlazeFace sees a letterboxed 128x128 (short range) or 192x192 (full range) picture, so in a
1280x720 frame the full-range model misses faces narrower than ~160 px (measured). Searching
overlapping square tiles as well as the whole frame finds faces down to ~1/8 of the tile size.
Tiles can be spread over several calls (``tiles_per_call``) to bound the cost of one call.

The models run on LiteRT directly (``blazeface_lite.py``: the same detections, 6.6 against
8.7 ms per full-range run at 720p here) where it can be imported, else in MediaPipe's graph.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from livecam.analysis import litert
from livecam.analysis.blazeface_lite import Detection, DirectBlazeFace
from livecam.core.types import Faces, ImageBGR

if TYPE_CHECKING:  # second_look imports the tracker, and it SciPy: 36 MB that `identity add`
    # and the other users of the detector do not need
    from livecam.analysis.second_look import StripPlace

# Tile overlap as a fraction of the tile: a face up to this fraction of a tile is whole in one.
_TILE_OVERLAP = 0.3
# Detections whose box comes this close to a tile's inner edge are cut faces: another tile
# holds them whole.
_EDGE_MARGIN_PX = 2.0
_MERGE_OVERLAP = 0.5
# detect_places: the places whose maps are kept (a frame size's strips are 8-12)
_MAPS_KEPT = 32


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What one :meth:`BlazeFaceDetector.search` found (``faces``, as ``detect`` returns them)
    and which tiles it searched: ``searched_xyxy`` (T, 4) float32 px (a face inside one of
    them, not larger than the tile allows, would have been found)."""

    faces: Faces
    searched_xyxy: np.ndarray


class BlazeFaceDetector:
    """Finds faces in BGR frames. ``detect`` returns boxes, scores and 6 keypoints.

    ``model``: ``short``, ``full`` or ``auto`` (both, merged). ``whole_frame=False`` searches
    the tiles only (a tile search beside a whole-frame detector). ``weak=True`` keeps
    detections down to ``min_score`` on LiteRT too, below the model's own threshold (0.5
    short, 0.6 full range), as MediaPipe's graph does: the face follower takes a weak hit
    (a half-hidden face scores ~0.4) as a sign a hidden face is still there.
    Only one thread may call :meth:`detect` at a time. As a tile search
    (:class:`livecam.analysis.networks.TileSearch`) it runs on a worker thread in live mode.
    """

    on_caller_thread = False
    deferred = False

    def __init__(self, *, model: str = "full", min_score: float = 0.5, max_faces: int = 4,
                 tile_size_px: int = 384, tiles_per_call: int = 0,
                 whole_frame: bool = True, weak: bool = False) -> None:
        if model not in ("short", "full", "auto"):
            raise ValueError(f"model must be short, full or auto, got {model!r}")
        self.model = model
        self.min_score = min_score
        self.max_faces = max_faces
        self.tile_size_px = tile_size_px
        self.tiles_per_call = tiles_per_call
        self.whole_frame = whole_frame
        self.weak = weak
        self._short: Any = None
        self._full: Any = None
        self._next_tile = 0
        # detect_places: each kept place's remap maps, one pair per network
        self._maps: dict[tuple[bytes, bytes], list[tuple[np.ndarray, np.ndarray] | None]] = {}

    @property
    def runner(self) -> str:
        """``direct`` (LiteRT) or ``graph`` (MediaPipe); ``closed`` before ``open()``."""
        if self._full is None:
            return "closed"
        return "direct" if isinstance(self._full, DirectBlazeFace) else "graph"

    def open(self) -> None:
        if self._short is not None or self._full is not None:
            return
        # Tiles always use the full-range model: a tile's faces are small relative to it.
        if litert.litert_interpreter() is not None:
            floor = self.min_score if self.weak else None
            if self.model in ("short", "auto") and self.whole_frame:
                self._short = DirectBlazeFace("short", min_score=floor)
            self._full = DirectBlazeFace("full", min_score=floor)
            return
        import mediapipe as mp

        make = mp.solutions.face_detection.FaceDetection
        if self.model in ("short", "auto") and self.whole_frame:
            self._short = _GraphBlazeFace(make(model_selection=0,
                                               min_detection_confidence=self.min_score))
        self._full = _GraphBlazeFace(make(model_selection=1,
                                          min_detection_confidence=self.min_score))

    def close(self) -> None:
        for name in ("_short", "_full"):
            runner = getattr(self, name)
            setattr(self, name, None)
            if isinstance(runner, _GraphBlazeFace):
                runner.solution.close()

    def __enter__(self) -> BlazeFaceDetector:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tiles(self, width_px: int, height_px: int) -> list[tuple[int, int, int]]:
        """Tiles (x0, y0, side) covering the frame, or [] when the frame needs none."""
        return tiles(width_px, height_px, self.tile_size_px)

    def detect(self, image_bgr: ImageBGR, *, all_tiles: bool = False) -> Faces:
        """Faces in one frame, best first, at most ``max_faces``; ``track_ids`` are -1.

        ``keypoints_xy`` is (N, 6, 2) px in BlazeFace order (image-left eye, image-right eye,
        nose tip, mouth centre, image-left ear tragion, image-right ear tragion).
        ``all_tiles`` searches every tile now (for still photos).
        """
        return self.search(image_bgr, all_tiles=all_tiles).faces

    def search(self, image_bgr: ImageBGR, *, all_tiles: bool = False) -> SearchResult:
        """:meth:`detect`, and which tiles it searched."""
        if self._full is None:
            raise RuntimeError("BlazeFaceDetector.open() was not called")
        searched: list[tuple[int, int, int, int]] = []
        if image_bgr.ndim != 3 or image_bgr.shape[2] != 3 or min(image_bgr.shape[:2]) < 8:
            return SearchResult(Faces.empty(), np.zeros((0, 4), np.float32))
        h, w = image_bgr.shape[:2]
        # LiteRT's runners turn only their inputs (and the tiles) to RGB, not the frame: a
        # second frame-sized array per search (33 MB at 3333 x 3333, in two threads at once)
        rgb = None if self.runner == "direct" else cv2.cvtColor(image_bgr, cv2.COLOR_BGR2RGB)
        found: list[tuple[np.ndarray, float, np.ndarray]] = []
        whole_runners = [r for r in (self._short, self._full if self.model in ("full", "auto")
                                     and self.whole_frame else None) if r is not None]
        for runner in whole_runners:
            found += _placed(runner.detect_bgr(image_bgr) if rgb is None else runner.detect(rgb),
                             (0, 0, w, h), None)
        tiles = self.tiles(w, h)
        if tiles:
            count = len(tiles) if all_tiles or self.tiles_per_call <= 0 else min(
                self.tiles_per_call, len(tiles))
            for _ in range(count):
                x0, y0, x1, y1 = tile_crop(tiles[self._next_tile % len(tiles)], w, h)
                self._next_tile = (self._next_tile + 1) % len(tiles)
                searched.append((x0, y0, x1, y1))
                tile = (cv2.cvtColor(image_bgr[y0:y1, x0:x1], cv2.COLOR_BGR2RGB) if rgb is None
                        else np.ascontiguousarray(rgb[y0:y1, x0:x1]))
                found += _placed(self._full.detect(tile), (x0, y0, x1, y1), (w, h))
        return SearchResult(merge_detections(found, self.max_faces),
                            np.array(searched, np.float32).reshape(-1, 4))

    def detect_places(self, image_bgr: ImageBGR,
                      places: Sequence[StripPlace]) -> list[Faces] | None:
        """:meth:`detect` on each picture ``places`` describes (``image_bgr[np.ix_(rows,
        cols)]``: the edge strips, :func:`livecam.analysis.edges.strip_places`), in picture
        px, each network's input sampled from the frame directly (one remap per picture and
        network, :meth:`DirectBlazeFace.input_map`; the maps are kept for places that are
        kept): no picture is written (a 720p frame's eight 720x720 strips, 12 MB, and their
        colour conversion). None where that cannot be done (MediaPipe's graphs, a tiling
        detector, a picture :meth:`~DirectBlazeFace.input_map` cannot map): build the
        pictures then."""
        runners = [r for r in (self._short, self._full if self.model in ("full", "auto")
                               else None) if r is not None]
        if (not runners or not self.whole_frame or self.tile_size_px > 0
                or not all(isinstance(r, DirectBlazeFace) for r in runners)):
            return None
        maps = []
        for place in places:
            key = (place.rows.tobytes(), place.cols.tobytes())
            got = self._maps.get(key) if place.kept else None
            if got is None:
                got = [r.input_map(place.rows, place.cols) for r in runners]
                if place.kept:
                    if len(self._maps) >= _MAPS_KEPT:
                        self._maps.clear()  # another frame size: the old places are gone
                    self._maps[key] = got
            if any(m is None for m in got):
                return None
            maps.append(got)
        out = []
        for place, place_maps in zip(places, maps, strict=True):
            side = float(len(place.rows))
            found: list[tuple[np.ndarray, float, np.ndarray]] = []
            for runner, pair in zip(runners, place_maps, strict=True):
                assert pair is not None
                crop = cv2.remap(image_bgr, pair[0], pair[1], cv2.INTER_LINEAR,
                                 borderMode=cv2.BORDER_REPLICATE)
                rgb = np.asarray(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB), np.uint8)
                found += [(box, score, kps) for box, score, kps
                          in runner.detect_input(rgb, side, (0.0, 0.0)) if kps.shape == (6, 2)]
            out.append(merge_detections(found, self.max_faces))
        return out


def tiles(width_px: int, height_px: int, side_px: int) -> list[tuple[int, int, int]]:
    """Overlapping square tiles (x0, y0, side) covering a frame, row by row, or [] when the
    frame needs none (no tiling, or a frame hardly larger than a tile)."""
    if side_px <= 0 or max(width_px, height_px) <= side_px * 1.25:
        return []
    return [(x, y, side_px) for y in _starts(height_px, side_px)
            for x in _starts(width_px, side_px)]


def tile_crop(tile: tuple[int, int, int], width_px: int, height_px: int
              ) -> tuple[int, int, int, int]:
    """A tile's pixels (x0, y0, x1, y1): the tile cut to the frame (a frame narrower than a
    tile in one direction)."""
    x0, y0, side = tile
    return x0, y0, min(width_px, x0 + side), min(height_px, y0 + side)


def cut_by_inner_edge(box_xyxy: np.ndarray, crop_xyxy: tuple[int, int, int, int],
                      width_px: int, height_px: int) -> bool:
    """A detection in a tile whose box touches one of the tile's edges inside the frame: a
    face cut by the tile, which a neighbouring tile holds whole."""
    x0, y0, x1, y1 = crop_xyxy
    m = _EDGE_MARGIN_PX
    return bool((x0 > 0 and box_xyxy[0] <= x0 + m) or (y0 > 0 and box_xyxy[1] <= y0 + m)
                or (x1 < width_px and box_xyxy[2] >= x1 - m)
                or (y1 < height_px and box_xyxy[3] >= y1 - m))


def _starts(length: int, side: int) -> list[int]:
    if length <= side:
        return [0]
    n = math.ceil((length - side) / (side * (1 - _TILE_OVERLAP))) + 1
    return [round(i * (length - side) / (n - 1)) for i in range(n)]


class _GraphBlazeFace:
    """``mp.solutions.face_detection`` with :class:`DirectBlazeFace`'s ``detect``."""

    def __init__(self, solution: Any) -> None:
        self.solution = solution

    def detect(self, image_rgb: np.ndarray) -> list[Detection]:
        h, w = image_rgb.shape[:2]
        out: list[Detection] = []
        for det in self.solution.process(image_rgb).detections or ():
            loc = det.location_data
            bb = loc.relative_bounding_box
            box = np.array([bb.xmin * w, bb.ymin * h, (bb.xmin + bb.width) * w,
                            (bb.ymin + bb.height) * h], np.float32)
            kps = np.array([[k.x * w, k.y * h] for k in loc.relative_keypoints],
                           np.float32).reshape(-1, 2)
            out.append((box, float(det.score[0]), kps))
        return out


def _placed(detections: list[Detection], crop: tuple[int, int, int, int],
            frame_wh: tuple[int, int] | None) -> list[tuple[np.ndarray, float, np.ndarray]]:
    """A runner's ``detections`` in a crop ``crop`` (x0, y0, x1, y1) of a frame of
    ``frame_wh`` px (a tile: faces cut by its inner edges left out) or the whole frame (None),
    in frame px."""
    out: list[tuple[np.ndarray, float, np.ndarray]] = []
    x0, y0 = crop[:2]
    shift = np.array([x0, y0], np.float32)
    for box, score, kps in detections:
        box = box + np.tile(shift, 2)
        kps = kps + shift
        if kps.shape != (6, 2):
            continue
        if frame_wh is not None and cut_by_inner_edge(box, crop, *frame_wh):
            continue
        out.append((box, score, kps))
    return out


def merge_detections(found: list[tuple[np.ndarray, float, np.ndarray]],
                     max_faces: int) -> Faces:
    """(box, score, keypoints) detections as :class:`Faces`, at most ``max_faces``: greedy
    suppression by overlap over the smaller box, best score first (tiles, and the two models
    of ``auto``, see the same face)."""
    found = sorted(found, key=lambda item: -item[1])
    kept: list[tuple[np.ndarray, float, np.ndarray]] = []
    for box, score, kps in found:
        if all(_overlap_of_smaller(box, other[0]) < _MERGE_OVERLAP for other in kept):
            kept.append((box, score, kps))
    kept = kept[:max_faces]
    if not kept:
        return Faces.empty()
    return Faces(
        boxes_xyxy=np.stack([k[0] for k in kept]).astype(np.float32),
        scores=np.array([k[1] for k in kept], np.float32),
        keypoints_xy=np.stack([k[2] for k in kept]).astype(np.float32),
        track_ids=np.full(len(kept), -1, np.int64),
    )


def _overlap_of_smaller(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, float(min(a[2], b[2]) - max(a[0], b[0])))
    ih = max(0.0, float(min(a[3], b[3]) - max(a[1], b[1])))
    area_a = max(0.0, float((a[2] - a[0]) * (a[3] - a[1])))
    area_b = max(0.0, float((b[2] - b[0]) * (b[3] - b[1])))
    smaller = min(area_a, area_b)
    return iw * ih / smaller if smaller > 0 else 0.0

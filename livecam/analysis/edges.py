"""Faces cut by the frame's edge: found by the detector on mirrored edge strips, and covered.

BlazeFace rarely fires on a face cut by the frame edge (a face at the top edge showing one
eye, its nose and lips scored 0.48/0.55, under the follower's 0.6 for a face of its own; at the
left edge 0.31 or nothing). Mirrored at the edge, the cut face reads as a whole (if odd) face;
and seen in a strip along the edge rather than in the whole frame, it is 2-3 times larger in
the detector's input. Measured on the leak clip ``slide_left`` (a 180 px face entering), the
short-range detector on a 360 px strip mirrored to 720x720 scored 0.32 with 13 % of the face
in view, 0.71 at 26 %, 0.78 at 32 %; on the whole frame mirrored out by 154 px it found nothing
below 32 %, and on the plain frame nothing below 38 %.

So the follower runs the detector on :func:`edge_strips` (each edge's strip, ``depth`` deep,
cut into pieces no longer than twice that and mirrored outward, the bottom's also with its last
row repeated: eight square 720x720 pictures for a 1280x720 frame; a hit in those with repeated
rows only where a second look at it finds it again, :mod:`livecam.analysis.second_look`) and
takes every hit whose box crosses the frame's edge, with the weak whole-frame hits that do, as
a face to cover (``Unswappable.NO_MESH``: box only) unless a followed face is there: a cut face
is covered until enough of it is in view for its mesh to be followed and swapped. Boxes are
kept as found, partly outside the frame, so the cover's ellipse sits on the face. These faces
are covered, never tracked: a track of its own for a cut face would take a track id and a
place, and would be a second track on a face that a followed face's lost track waits for at the
edge (both broke following a group and a face re-entering).

:class:`StripSearch` is the search itself (strips built and run through the detector: the
detector's input pictures, made in C, which lets go of the GIL as the detector's own resizing
does); the follower takes it as a seam, so benchmarks of the follower's own Python can leave the
networks' image work out.

:class:`EdgeMemory` keeps a hit covered for a few frames after the detector last saw it: the
scores of cut faces are weak and flicker from frame to frame. A remembered hit's cover
reaches further into the frame the older it is (:func:`cover_box`): the face goes on entering.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import cv2
import numpy as np

from livecam.analysis.second_look import (
    SECOND_LOOK_PX,
    SECOND_LOOK_SPANS,
    StripPlace,
    Verdicts,
    seen_again,
)
from livecam.core.types import Faces, ImageBGR

#: A strip's depth from the edge, as a share of the frame's shorter side (720p: 360 px).
DEPTH_SHARE = 0.5
#: A box counts as crossing the edge when it comes this close to it (px).
EDGE_MARGIN_PX = 2.0
#: Boxes with less than this share of their area inside the frame are left out (the mirror
#: image of a face, or a face with nothing in view).
MIN_INSIDE = 0.04
#: ... and those with less than this share inside need :data:`SURE_SCORE`. A face cut by the
#: edge mostly reads, mirrored, as a face centred on the edge (0.3-0.6 of its box inside,
#: measured on the ``slide_*`` leak clips); a weak box mostly in the mirrored half is often the
#: mirror's own pattern (t1's table edge mirrored at the bottom: 0.47 with 12-18 % inside, on
#: every frame, 0.53 with sensor noise), while a face only entering scored 0.65 with 10 %
#: inside. (``slide_bottom``'s first frames in view, decoded from the clip's H.264 as livecam
#: sees it, score 0.59 and 0.51 with 5-7 % inside: 0.5 here took the table edge for a face.)
HALF_INSIDE = 0.25
SURE_SCORE = 0.6
#: ... and a weak one some colour in view (median HSV saturation, 0-255; :func:`looks_grey`).
#: A black-and-white camera's weak edge hits are left out with it; its strong ones stay.
GREY_SATURATION = 16.0
#: An edge hit's cover spans at least this share of the frame's shorter side along the edge
#: (:func:`cover_box`; a box found on half a face or more, already larger, is kept as found).
#: Before, it was three times the box's size up to this share: a sliver's box at 7 % in view
#: (``enter``: 41 px on a 212 px face; ``leave_reenter``: 57 px on 204) left the face's
#: lower half as it is (residual 0.33-0.39).
MIN_ALONG_SHARE = 0.4
#: ... and on the left or right edge, this share of what it adds goes below the box: the
#: detector finds a sliver's eyes and brows, above the face's middle (``enter``,
#: ``leave_reenter``, ``slide_right``: boxes centred 50-90 px above it).
BELOW_SHARE = 0.65
#: An edge hit with this share of its in-frame part on a face already there is that face.
ON_FACE_SHARE = 0.5
#: Frames an edge hit stays covered after it was last detected: frames followed (the
#: detector's flicker is per run: live mode under load follows a frame in three or four, and
#: counted in input frames the memory ran out between two runs, ``slide_bottom``'s face showing
#: at 58 % in view), up to :data:`MEMORY_MAX_AGE` input frames.
MEMORY_FRAMES = 8
MEMORY_MAX_AGE = 30
#: A remembered hit's cover reaches this share of its size along the edge further into the
#: frame per frame since it was detected (up to :data:`INWARD_MAX`): the face it was goes on
#: entering, and a live frame under load comes several frames after the last hit. Measured on
#: ``slide_bottom`` (10 px a frame, 5 % of the face's width; ``enter`` walks 11 %): with the
#: hit's box kept as it was, the face showed above its cover two or three frames after the last
#: hit (input frames 14 and 19 at 32 and 58 % in view, the frames between them dropped).
INWARD_PER_FRAME = 0.15
INWARD_MAX = 1.0
#: Detections in the bottom pieces with their last row repeated (:func:`edge_strips`) need
#: :data:`REPEATED_SURE_SCORE`, or :data:`REPEATED_MIN_SCORE` with
#: :data:`REPEATED_MIN_INSIDE` of their box above the repeated rows. The repeated rows carry
#: no face, so a face found there lies mostly above them (0.74-1.0 of its box on
#: ``slide_bottom`` and ``cut_bottom``; the weakest that mattered, 32 % in view, 0.47); the
#: leak clips' plain backdrop, its last row repeated, made large boxes straddling the edge
#: (0.57-0.68 inside, 0.30-0.47) on every clip, and their frame code's bars, repeated into
#: stripes, small ones above it (0.83-0.87 inside, 0.31-0.41): covers where no face was.
REPEATED_SURE_SCORE = 0.5
REPEATED_MIN_SCORE = 0.45
REPEATED_MIN_INSIDE = 0.72
#: ... and one ending less than this share of its height above the edge reaches it
#: (:func:`reaching_the_edge`).
REPEATED_NEAR = 0.2
#: A strip's picture is searched again only when its band along the edge, this share of the
#: strip's depth (720p: 90 px), changed since its last search: by more than
#: :data:`UNCHANGED_LEVELS` levels in a colour channel's mean over a
#: :data:`UNCHANGED_CELL_PX` square cell; otherwise the detections found then stand (only
#: hits that cross the edge are used, and a face entering or cut by the edge has its pixels
#: at the edge: it changes the band; what moves deeper in, a face in the room, does not make
#: the strip searched again). Each picture is searched afresh at least every
#: :data:`UNCHANGED_MAX_FRAMES` searches, the pictures taking turns. A sliver of a face
#: entering (``slide_left``'s first frame: 9 px wide) moves a cell's mean by tens of levels;
#: sensor noise moves an 8x8 cell's mean by well under one.
UNCHANGED_BAND = 0.25
UNCHANGED_CELL_PX = 8
UNCHANGED_LEVELS = 4
UNCHANGED_MAX_FRAMES = 8


def cover_box(box: Sequence[float], width_px: int, height_px: int,
              age_frames: int = 0) -> np.ndarray:
    """The box (4,) float32 to cover for an edge hit ``box``: at least
    :data:`MIN_ALONG_SHARE` of the frame's shorter side along the edge it crosses (about its
    centre on the top or bottom edge, :data:`BELOW_SHARE` of the growth below it on the left
    or right), as found across it; for a hit detected ``age_frames`` frames ago (remembered),
    also reaching further into the frame by :data:`INWARD_PER_FRAME` of that size per frame
    (up to :data:`INWARD_MAX` of it).

    A face only entering is seen as a sliver along the edge, and the detector's box on it is
    a fraction of the face (on ``slide_right`` at 7-26 % in view: 71-93 px tall on a 206 px
    face, centred up to 80 px off the face's centre): the cover's ellipse in that box left
    the rest of the sliver as it is."""
    x1, y1, x2, y2 = (float(v) for v in box)
    m = EDGE_MARGIN_PX
    grow_x = (x1 <= m or x2 >= width_px - m) is False and (y1 <= m or y2 >= height_px - m)
    grow_y = x1 <= m or x2 >= width_px - m
    least = MIN_ALONG_SHARE * min(width_px, height_px)
    if grow_y:  # a left or right edge: stretch it up and down, more down
        pad = max(0.0, least - (y2 - y1))
        y1, y2 = y1 - (1.0 - BELOW_SHARE) * pad, y2 + BELOW_SHARE * pad
    if grow_x:  # the top or bottom edge only: stretch it sideways
        pad = 0.5 * max(0.0, least - (x2 - x1))
        x1, x2 = x1 - pad, x2 + pad
    if age_frames > 0:  # the face has gone on entering since: cover further in
        reach = min(age_frames * INWARD_PER_FRAME, INWARD_MAX)
        if grow_y:
            dx = reach * (y2 - y1)
            x1, x2 = (x1 - dx if x2 >= width_px - m else x1), (x2 + dx if x1 <= m else x2)
        if y1 <= m or y2 >= height_px - m:
            dy = reach * (x2 - x1 if grow_x else y2 - y1)
            y1, y2 = (y1 - dy if y2 >= height_px - m else y1), (y2 + dy if y1 <= m else y2)
    return np.array([x1, y1, x2, y2], np.float32)


class Detector(Protocol):
    def detect(self, image_bgr: ImageBGR) -> Faces: ...


class EdgeSearch(Protocol):
    """Finds faces at the frame's edges. ``find`` returns (detections, offset (2,)) pairs:
    frame px = detection px + offset; ``ahead``, called before the frame's first call to the
    face networks, may ask for the frame's pictures with that call. Only the follower's
    thread."""

    def ahead(self, image_bgr: ImageBGR) -> None: ...

    def find(self, image_bgr: ImageBGR) -> list[tuple[Faces, np.ndarray]]: ...


@dataclass(frozen=True)
class EdgeStrip:
    """One piece of an edge's strip, mirrored outward: ``image_bgr`` (a new array) and where
    it lies: frame px = picture px + ``offset_xy`` (the mirrored half falls outside the frame,
    where hits are left out)."""

    image_bgr: ImageBGR
    offset_xy: np.ndarray  # (2,) float32: picture px + offset = frame px
    #: the picture's last real row, where rows repeat below it (None: mirrored)
    repeated_below: int | None = None


def strip_depth(height_px: int, width_px: int, depth_share: float = DEPTH_SHARE) -> int:
    """How deep (px) each edge's strip reaches into an (H, W) frame."""
    return max(8, round(depth_share * min(width_px, height_px)))


def strip_pieces(height_px: int, width_px: int,
                 depth_px: int) -> Iterator[tuple[str, int, int]]:
    """(edge, start px along it, piece length px) of each piece of each edge's strip, edges
    in the order left, right, top, bottom: pieces at most twice as long as deep, spread evenly
    from end to end (overlapping where the edge is not a multiple of it)."""
    for edge in ("left", "right", "top", "bottom"):
        length = height_px if edge in ("left", "right") else width_px
        n = max(1, math.ceil(length / (2 * depth_px)))
        piece = min(length, 2 * depth_px)
        for i in range(n):
            yield edge, round(i * (length - piece) / max(1, n - 1)), piece


def edge_strips(image_bgr: ImageBGR, depth_share: float = DEPTH_SHARE) -> list[EdgeStrip]:
    """Each edge's strip of ``image_bgr`` (H, W, 3), ``depth_share`` of the shorter side
    deep, in pieces at most twice as long as deep, each mirrored outward across the edge
    (the bottom's pieces also with their last row repeated instead).

    Why the bottom twice: a face entering from below shows its forehead and eyes first,
    which, mirrored, make a face with four eyes (``slide_bottom``: BlazeFace found nothing at
    32-42 % in view, 0.39-0.51 at 47-58 %); with the last row repeated the face reads as one
    whose lower half is hidden (0.47-0.78 at 32-53 %; ``cut_bottom`` 0.66-0.72 against
    0.39-0.50). The mirror alone found the hair and the first 7 % in view (the repeated rows
    nothing under 32 %), so both run: two more detector runs per frame. Faces are mirror
    images of themselves left to right, not top to bottom; at the top edge, where the chin
    shows first, the mirror alone finds more (``slide_top``: repeated rows found nothing
    under 67 % in view)."""
    h, w = image_bgr.shape[:2]
    d = strip_depth(h, w, depth_share)
    out: list[EdgeStrip] = []
    for edge, s, piece in strip_pieces(h, w, d):
        if edge == "left":
            crop = image_bgr[s:s + piece, :d]
            pic = cv2.copyMakeBorder(crop, 0, 0, d, 0, cv2.BORDER_REFLECT_101)
            off = (-d, s)
        elif edge == "right":
            crop = image_bgr[s:s + piece, w - d:]
            pic = cv2.copyMakeBorder(crop, 0, 0, 0, d, cv2.BORDER_REFLECT_101)
            off = (w - d, s)
        elif edge == "top":
            crop = image_bgr[:d, s:s + piece]
            pic = cv2.copyMakeBorder(crop, d, 0, 0, 0, cv2.BORDER_REFLECT_101)
            off = (s, -d)
        else:
            crop = image_bgr[h - d:, s:s + piece]
            pic = cv2.copyMakeBorder(crop, 0, d, 0, 0, cv2.BORDER_REFLECT_101)
            off = (s, h - d)
            # and with its last row repeated below it
            out.append(EdgeStrip(np.ascontiguousarray(
                cv2.copyMakeBorder(crop, 0, d, 0, 0, cv2.BORDER_REPLICATE)),
                np.array(off, np.float32), d))
        out.append(EdgeStrip(np.ascontiguousarray(pic), np.array(off, np.float32)))
    return out


def _thumbnail(image_bgr: ImageBGR) -> np.ndarray:
    """(H / cell, W / cell, 3) uint8 mean colour of ``image_bgr``'s cells
    (:data:`UNCHANGED_CELL_PX` square)."""
    h, w = image_bgr.shape[:2]
    size = (max(1, w // UNCHANGED_CELL_PX), max(1, h // UNCHANGED_CELL_PX))
    return np.asarray(cv2.resize(image_bgr, size, interpolation=cv2.INTER_AREA), np.uint8)


def _band_cells(height_px: int, width_px: int,
                depth_share: float = DEPTH_SHARE) -> list[tuple[slice, slice]]:
    """For each picture of :func:`strip_places` (the same order), the :func:`_thumbnail`
    cells (rows, cols) of its band: :data:`UNCHANGED_BAND` of its depth along its edge."""
    h, w = height_px, width_px
    d = strip_depth(h, w, depth_share)
    band = max(1, math.ceil(UNCHANGED_BAND * d))
    ch, cw = max(1, h // UNCHANGED_CELL_PX), max(1, w // UNCHANGED_CELL_PX)

    def cut(a: int, b: int, n: int, length: int) -> slice:  # frame px [a, b) -> cells
        return slice(min(n - 1, a * n // length), max(1, math.ceil(b * n / length)))

    out: list[tuple[slice, slice]] = []
    for edge, s, piece in strip_pieces(h, w, d):
        if edge == "left":
            cells = (cut(s, s + piece, ch, h), cut(0, band, cw, w))
        elif edge == "right":
            cells = (cut(s, s + piece, ch, h), cut(w - band, w, cw, w))
        elif edge == "top":
            cells = (cut(0, band, ch, h), cut(s, s + piece, cw, w))
        else:
            cells = (cut(h - band, h, ch, h), cut(s, s + piece, cw, w))
            out.append(cells)  # the picture with repeated rows, then the mirrored one
        out.append(cells)
    return out


def _reflected(first: int, n: int, before: int, after: int) -> np.ndarray:
    """Frame indices ``first .. first + n`` with ``before``/``after`` more mirrored on each
    side, as ``cv2.copyMakeBorder`` (BORDER_REFLECT_101) mirrors them (asked of it, so the
    two agree wherever the border is deeper than the strip)."""
    index = np.arange(first, first + n, dtype=np.int32)[None]
    out = cv2.copyMakeBorder(index, 0, 0, before, after, cv2.BORDER_REFLECT_101)
    return out[0].astype(np.int64)


def strip_places(height_px: int, width_px: int,
                 depth_share: float = DEPTH_SHARE) -> list[StripPlace]:
    """The pictures of :func:`edge_strips` for an (H, W) frame as frame indices, in the same
    order: ``image_bgr[np.ix_(rows, cols)]`` is each picture, bit for bit."""
    h, w = height_px, width_px
    d = strip_depth(h, w, depth_share)
    out: list[StripPlace] = []
    for edge, s, piece in strip_pieces(h, w, d):
        along = np.arange(s, s + piece, dtype=np.int64)
        if edge == "left":
            rows, cols, off = along, _reflected(0, min(d, w), d, 0), (-d, s)
        elif edge == "right":
            rows, cols, off = along, _reflected(w - d, d, 0, d), (w - d, s)
        elif edge == "top":
            rows, cols, off = _reflected(0, min(d, h), d, 0), along, (s, -d)
        else:
            rows, cols, off = _reflected(h - d, d, 0, d), along, (s, h - d)
            # and with its last row repeated below it (BORDER_REPLICATE)
            repeated = np.concatenate([np.arange(h - d, h, dtype=np.int64),
                                       np.full(d, h - 1, np.int64)])
            out.append(StripPlace(repeated, along, np.array(off, np.float32), d))
        out.append(StripPlace(rows, cols, np.array(off, np.float32)))
    return out


def crosses_edge(box: Sequence[float], width_px: int, height_px: int,
                 min_inside: float = MIN_INSIDE) -> bool:
    """True when ``box`` (x1, y1, x2, y2) reaches the frame's edge and lies at least
    ``min_inside`` of its area inside the frame."""
    x1, y1, x2, y2 = (float(v) for v in box)
    m = EDGE_MARGIN_PX
    if not (x1 <= m or y1 <= m or x2 >= width_px - m or y2 >= height_px - m):
        return False
    area = max((x2 - x1) * (y2 - y1), 1e-6)
    iw = max(0.0, min(x2, width_px) - max(x1, 0.0))
    ih = max(0.0, min(y2, height_px) - max(y1, 0.0))
    return iw * ih / area >= min_inside


Hit = tuple[np.ndarray, float, np.ndarray]


def looks_grey(image_bgr: ImageBGR, box: Sequence[float]) -> bool:
    """True when the part of ``box`` inside ``image_bgr`` has almost no colour (median HSV
    saturation under :data:`GREY_SATURATION`, or nothing inside)."""
    h, w = image_bgr.shape[:2]
    x1, y1 = max(0, int(box[0])), max(0, int(box[1]))
    x2, y2 = min(w, math.ceil(box[2])), min(h, math.ceil(box[3]))
    if x2 <= x1 or y2 <= y1:
        return True
    hsv = cv2.cvtColor(image_bgr[y1:y2, x1:x2], cv2.COLOR_BGR2HSV)
    return float(np.median(hsv[:, :, 1])) < GREY_SATURATION


def edge_hits(found: list[tuple[Faces, np.ndarray]], image_bgr: ImageBGR,
              min_score: float) -> list[Hit]:
    """(box (4,), score, keypoints (6, 2)) in frame px of the detections that cross the
    edge of ``image_bgr`` (H, W, 3) with at least ``min_score``. A weak one (under
    :data:`SURE_SCORE`) needs :data:`HALF_INSIDE` of its box inside and some colour there
    (:func:`looks_grey`: the leak clips' frame code, black and white bars at the bottom
    edge, mirrored, scored 0.38; faces' skin 78-101 of 255 there). ``found``: (detections,
    offset (2,)) pairs: each strip's with its :attr:`EdgeStrip.offset_xy`, and this frame's
    own (weak ones too) with offset 0.

    In Python floats (``tolist``, ``np.array`` of floats): numpy's small array copies would
    let go of the GIL on every frame (:mod:`livecam.analysis.keepgil`)."""
    height_px, width_px = image_bgr.shape[:2]
    hits: list[Hit] = []
    for faces, by in found:
        if not len(faces):
            continue
        dx, dy = (float(v) for v in by.tolist())
        for row, score, marks in zip(faces.boxes_xyxy.tolist(), faces.scores.tolist(),
                                     faces.keypoints_xy.tolist(), strict=True):
            if score < min_score:
                continue
            box = [row[0] + dx, row[1] + dy, row[2] + dx, row[3] + dy]
            sure = score >= SURE_SCORE
            if (crosses_edge(box, width_px, height_px, MIN_INSIDE if sure else HALF_INSIDE)
                    and (sure or not looks_grey(image_bgr, box))):
                hits.append((np.array(box, np.float32), float(score),
                             np.array([[x + dx, y + dy] for x, y in marks], np.float32)))
    return hits


class StripDetector(Protocol):
    def detect_strips(self, image_bgr: ImageBGR,
                      places: Sequence[StripPlace]) -> list[Faces] | None: ...


@dataclass(frozen=True)
class _Due:
    """A frame's strip pictures (:meth:`StripSearch._plan`): its places, their bands' cells,
    which are due (``todo``) and those places (``pictures``, the list the networks are asked
    with)."""

    image: ImageBGR
    places: list[StripPlace]
    bands: list[np.ndarray]
    todo: list[int]
    pictures: list[StripPlace]


class StripSearch:
    """The detector of ``networks`` (anything with ``detect(image_bgr) -> Faces``, frame px)
    on each :func:`edge_strips` picture: (detections, offset) pairs for :func:`edge_hits`.
    Networks with ``detect_strips`` (:class:`StripDetector`) take the pictures as
    :func:`strip_places`: the GPU's build them from the frame it holds, the CPU's sample each
    picture's detector input straight from the frame (the same pixels, so the same
    detections); for others, or where those return None, they are built on the host (1080p:
    six 1080x1080 pictures, 21 MB written a frame). A second look's verdict on a place is kept
    while its pixels hold (:class:`~livecam.analysis.second_look.Verdicts`), and a
    picture whose band along the edge did not change since it was last searched is not
    searched again (:data:`UNCHANGED_BAND`; the GPU's networks too: a frame's strips are one
    batch call, whose host work, a round trip through the streams' batcher, is what limits
    many streams; networks with ``ask_strips`` take the frame's due pictures with its first
    call, :meth:`ahead`, so they cost no round trip of their own). Only the follower's
    thread; at most one :meth:`ahead` and one :meth:`find` per frame, in that order."""

    def __init__(self, networks: Detector) -> None:
        self.networks = networks
        # what the networks can do beyond ``detect``, looked up once
        self._prepare_pictures = getattr(networks, "prepare_pictures", None)
        self._ask_strips = getattr(networks, "ask_strips", None)
        self._detect_strips = getattr(networks, "detect_strips", None)
        self._places: tuple[tuple[int, int], list[StripPlace]] | None = None
        self.verdicts = Verdicts()
        self._bands: tuple[tuple[int, int], list[tuple[slice, slice]]] | None = None
        # each place's detections and its band's thumbnail cells when they were found
        self._kept: dict[int, tuple[Faces, np.ndarray]] = {}
        self._searches = 0
        self._planned: _Due | None = None  # :meth:`ahead`'s, for this frame's :meth:`find`

    def prepare(self, width_px: int, height_px: int) -> None:
        """Networks that build the pictures on the device (``prepare_pictures``) make their
        stacks for this frame size's strips (a place for each strip of a size: a frame's are
        detected in one call) and a second look's pictures now."""
        prepare = self._prepare_pictures
        if prepare is None:
            return
        counts = collections.Counter((len(p.rows), len(p.cols))
                                     for p in strip_places(height_px, width_px))
        look = (SECOND_LOOK_PX, SECOND_LOOK_PX)  # a second look's pictures: one call
        counts[look] = max(counts[look], len(SECOND_LOOK_SPANS))
        counts.pop((height_px, width_px), None)  # a picture of the frame's size is uploaded
        prepare(dict(counts))

    def ahead(self, image_bgr: ImageBGR) -> None:
        """Before the frame's first call to the networks: which pictures are due this frame,
        asked with that call from networks that take them so (``ask_strips``: the GPU's)."""
        self._planned = self._plan(image_bgr)
        if self._ask_strips is not None and self._planned.todo:
            self._ask_strips(image_bgr, self._planned.pictures)

    def _plan(self, image_bgr: ImageBGR) -> _Due:
        self.verdicts.next_frame()
        self._searches += 1
        size = (int(image_bgr.shape[0]), int(image_bgr.shape[1]))
        if self._places is None or self._places[0] != size:
            self._places = (size, strip_places(*size))
            self._bands = (size, _band_cells(*size))
            self._kept.clear()
        places = self._places[1]
        assert self._bands is not None
        cells = _thumbnail(image_bgr)
        bands = [cells[rows, cols] for rows, cols in self._bands[1]]
        todo = [k for k in range(len(places)) if self._due(k, bands[k])]
        return _Due(image_bgr, places, bands, todo, [places[k] for k in todo])

    def find(self, image_bgr: ImageBGR) -> list[tuple[Faces, np.ndarray]]:
        due, self._planned = self._planned, None
        if due is None or due.image is not image_bgr:
            due = self._plan(image_bgr)
        places, bands, todo = due.places, due.bands, due.todo
        size = (int(image_bgr.shape[0]), int(image_bgr.shape[1]))
        found: list[Faces] | None = None
        if todo:
            on_device = self._detect_strips
            if on_device is not None:
                found = on_device(image_bgr, due.pictures)
            if found is None:  # the pictures built here (bit for bit edge_strips')
                found = [self.networks.detect(np.ascontiguousarray(
                    image_bgr[np.ix_(places[k].rows, places[k].cols)])) for k in todo]
            for k, faces in zip(todo, found, strict=True):
                self._kept[k] = (faces, bands[k])
        out = []
        for k, place in enumerate(places):
            kept = self._kept[k][0]
            faces = kept if k in todo else kept[np.arange(len(kept))]  # new arrays
            offset_xy, repeated_below = place.offset_xy, place.repeated_below
            if repeated_below is not None and len(faces):
                faces = faces[above_repeated_rows(faces, repeated_below)]
                taken = reaching_the_edge(faces, repeated_below)
                # a second look (at the box as found) only where :func:`edge_hits` would
                # take the box taken down
                keep = crossing(taken, offset_xy, size)
                faces, taken = faces[keep], taken[keep]
                if len(faces):
                    taken = taken[self._seen_again(image_bgr, faces, offset_xy)]
                faces = taken
            out.append((faces, offset_xy))
        return out

    def _due(self, k: int, band: np.ndarray) -> bool:
        """Whether place ``k``'s picture is searched this frame: its band along the edge
        (:data:`UNCHANGED_BAND`) changed since it was last searched (a thumbnail cell by
        :data:`UNCHANGED_LEVELS`), or its turn came (every :data:`UNCHANGED_MAX_FRAMES`th
        search, the places taking turns); otherwise its last detections stand."""
        kept = self._kept.get(k)
        if kept is None or (self._searches + k) % UNCHANGED_MAX_FRAMES == 0:
            return True
        diff = np.abs(band.astype(np.int16) - kept[1].astype(np.int16))
        return bool(diff.size == 0 or int(diff.max()) > UNCHANGED_LEVELS)

    def _seen_again(self, image_bgr: ImageBGR, faces: Faces, offset_xy: np.ndarray,
                    ) -> np.ndarray:
        """(N,) bool: which of ``faces`` (hits in a repeated-rows picture placed at
        ``offset_xy``) the detector finds again on a second look (:func:`seen_again`)."""
        h, w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        dx, dy = (float(v) for v in offset_xy.tolist())

        def detect(place: StripPlace) -> Faces:
            return self._detect_place(image_bgr, place)

        # networks that build pictures on the device detect a look's pictures in one call
        on_device = self._detect_strips
        detect_all = None if on_device is None else functools.partial(on_device, image_bgr)
        out = []
        for x1, y1, x2, y2 in faces.boxes_xyxy.tolist():
            box = [x1 + dx, y1 + dy, x2 + dx, y2 + dy]
            out.append(self.verdicts.seen_again(image_bgr, box, functools.partial(
                seen_again, detect, box, h, w, detect_all=detect_all)))
        return np.array(out, bool)

    def _detect_place(self, image_bgr: ImageBGR, place: StripPlace) -> Faces:
        """The detector on the picture ``place`` describes: built on the device where the
        networks hold the frame there (the frame stays their latest upload), else here."""
        on_device = self._detect_strips
        if on_device is not None:
            found = on_device(image_bgr, [place])
            if found is not None:
                return cast(Faces, found[0])
        return self.networks.detect(np.ascontiguousarray(image_bgr[np.ix_(place.rows,
                                                                           place.cols)]))


def reaching_the_edge(found: Faces, real_rows: int) -> Faces:
    """``found`` (a new object) with the boxes that end less than :data:`REPEATED_NEAR` of
    their height above the repeated rows taken down to them: the detector boxes only what
    it sees of a face whose rows below the edge are hidden (``slide_bottom`` at 58-62 % in
    view: 0.63-0.65, ending 8-18 px above the edge), and a box that does not reach the edge
    is left out as a face inside the frame."""
    boxes = found.boxes_xyxy.copy()
    near = boxes[:, 3] >= real_rows - REPEATED_NEAR * (boxes[:, 3] - boxes[:, 1])
    boxes[:, 3] = np.where(near, np.maximum(boxes[:, 3], real_rows), boxes[:, 3])
    return dataclasses.replace(found, boxes_xyxy=boxes)


def crossing(found: Faces, offset_xy: np.ndarray, frame_hw: tuple[int, int]) -> np.ndarray:
    """(N,) bool: the detections of a picture placed at ``offset_xy`` in a frame of
    ``frame_hw`` that cross the frame's edge (:func:`crosses_edge`, :data:`MIN_INSIDE`). In
    a picture whose rows repeat, taken down by :func:`reaching_the_edge` first: the others
    are faces inside the frame, which :func:`edge_hits` leaves out, and need no second look
    (a person in the room, their face and shoulders in the bottom strip, cost five detector
    runs a frame while they moved: 8 of a 2-face frame's 27 ms)."""
    dx, dy = (float(v) for v in offset_xy.tolist())
    h, w = frame_hw
    return np.array([crosses_edge([x1 + dx, y1 + dy, x2 + dx, y2 + dy], w, h)
                     for x1, y1, x2, y2 in found.boxes_xyxy.tolist()], bool)


def above_repeated_rows(found: Faces, real_rows: int) -> np.ndarray:
    """(N,) bool: the detections in a picture whose rows repeat below ``real_rows`` that may
    be a face: scoring :data:`REPEATED_SURE_SCORE`, or :data:`REPEATED_MIN_SCORE` with
    :data:`REPEATED_MIN_INSIDE` of the box above those rows."""
    y1, y2 = found.boxes_xyxy[:, 1], found.boxes_xyxy[:, 3]
    inside = (np.minimum(y2, real_rows) - y1) / np.maximum(y2 - y1, 1e-6)
    return np.asarray((found.scores >= REPEATED_SURE_SCORE)
                      | ((found.scores >= REPEATED_MIN_SCORE) & (inside >= REPEATED_MIN_INSIDE)))


def on_face(box: Sequence[float], others: Sequence[Sequence[float]], width_px: int,
            height_px: int, share: float = ON_FACE_SHARE) -> bool:
    """True when at least ``share`` of ``box``'s part inside the frame lies in one of
    ``others`` (boxes (4,)), or that part's centre does: an edge hit on a face already there
    (the hit's box, half of it the mirror's, is up to twice the face's, so IoU says little;
    one taken down to the bottom edge, :func:`reaching_the_edge`, adds the neck below a face
    in full view: 0.5 of it on the face, and its cover, left, lay over the swap)."""
    x1, y1 = max(float(box[0]), 0.0), max(float(box[1]), 0.0)
    x2, y2 = min(float(box[2]), width_px), min(float(box[3]), height_px)
    area = (x2 - x1) * (y2 - y1)
    if area <= 0.0:
        return True
    cx, cy = 0.5 * (x1 + x2), 0.5 * (y1 + y2)
    for o in others:
        a, b, c, d = (float(v) for v in o)
        iw, ih = min(x2, c) - max(x1, a), min(y2, d) - max(y1, b)
        inside = a <= cx <= c and b <= cy <= d
        if iw > 0.0 and ih > 0.0 and (iw * ih >= share * area or inside):
            return True
    return False


class EdgeMemory:
    """Edge hits of the last :data:`MEMORY_FRAMES` frames followed (and at most
    :data:`MEMORY_MAX_AGE` input frames): each frame's hits replace the remembered ones they
    overlap; the others stay until they are that old or lie on a face that is followed
    (:func:`on_face`). Only the follower's thread."""

    def __init__(self, frames: int = MEMORY_FRAMES, max_age: int = MEMORY_MAX_AGE) -> None:
        self.frames = frames
        self.max_age = max_age
        self._calls = 0
        # (box, score, keypoints, frame index, call number)
        self._kept: list[tuple[np.ndarray, float, np.ndarray, int, int]] = []

    @property
    def remembered(self) -> bool:
        """Whether any hit is kept from an earlier frame."""
        return bool(self._kept)

    def update(self, hits: list[Hit], index: int, faces: list[np.ndarray],
               size: tuple[int, int], covered: Sequence[np.ndarray] = (),
               changes: Sequence[Hit] = (),
               ) -> list[tuple[np.ndarray, float, np.ndarray, int]]:
        """This frame's hits (and ``changes``: where a body advanced in over a side edge,
        :mod:`livecam.analysis.edge_entry`, which replace no remembered hit: a detector's
        hit, aged, reaches further in than the change's box) plus the remembered ones no hit
        repeats, less those on one of ``faces`` (boxes (4,) of the faces followed) or of
        ``covered`` (faces covered this frame without a mesh) in a (W, H) frame: (box,
        score, keypoints, frames since it was detected: 0 for this frame's). Those on
        ``faces`` are forgotten; those on ``covered`` are kept: such a face's box stays where
        it was last detected, while the hit's cover reaches further in as it ages
        (:func:`cover_box`)."""
        from livecam.analysis.observations import overlaps

        w, h = size
        self._calls += 1
        rows = [b.tolist() for b in faces]
        now = [(b, s, k, index, self._calls) for b, s, k in [*hits, *changes]]
        fresh = [b for b, _, _ in hits]
        older = [e for e in self._kept
                 if self._calls - e[4] < self.frames and 0 <= index - e[3] <= self.max_age
                 and not overlaps(e[0], fresh)]
        self._kept = [e for e in now + older if not on_face(e[0].tolist(), rows, w, h)]
        boxes = [b.tolist() for b in covered]
        return [(b, s, k, index - i) for b, s, k, i, _ in self._kept
                if not on_face(b.tolist(), boxes, w, h)]

"""The face follower: every face in the frame is either followed (to be swapped) or withheld
(to be covered) on every frame, from the first frame it is in.

Per frame:

1. **Carry** each followed face: its face mesh on a ROI from its own landmarks of the previous
   frame, moved by its track's Kalman velocity (MediaPipe's tracking mode, per track).
2. **Detect** on the whole frame (``advanced.analysis.detect_each_frame``, the default): a face that
   appears is found on the frame it appears in, whatever the load; a live frame never goes out
   on an older frame's detections. The first frame is also searched in every tile; later, a
   few tiles every ``detect_every_n_frames`` frames (on a worker thread in live mode) find the
   faces too small for the whole-frame pass.
3. **Admit** the detections that are no followed face: while fewer than ``max_faces`` faces
   are followed (a lost one keeps its place for ``lost_cover_frames``), the best gets a mesh
   (run again on its own landmarks until it settles where the carried meshes will be) and is
   followed from now on; the others are *box-only* faces, covered where they were last
   detected. The faces followed stay the same while they are in view (hysteresis), so on a
   still picture nothing ever changes.
4. **Track** every observation with ByteTrack (boxes around the mesh, or the detection box for
   box-only faces: the two agree to ~5 %), smooth the followed faces' landmarks (One Euro),
   and apply ``analysis.select``.

Out come the faces to swap (confirmed, followed, selected) and the withheld faces with why
(:class:`~livecam.core.types.Unswappable`): just found and not yet confirmed (``PENDING``),
beyond ``max_faces`` (``OVER_MAX``), detected without a mesh (``NO_MESH``), not seen this frame
but predicted by the tracker (``LOST``). Faces that ``select`` leaves out are neither: that is
the user's choice.

The networks sit behind :class:`~livecam.analysis.networks.FaceNetworks` (whole-frame
detector and face mesh) and :class:`~livecam.analysis.networks.TileSearch`, so the GPU pipeline
can drive this same follower with its own backends. Where the mesh is run (carried, checked
against the detections, settled for a new face) is :mod:`livecam.analysis.mesh_runs`.
"""

from __future__ import annotations

import logging
import time
from typing import cast

import numpy as np

from livecam.analysis import behind, edges, mesh_runs
from livecam.analysis.background import BackgroundDetector
from livecam.analysis.detect import SearchResult
from livecam.analysis.edge_entry import EdgeEntry
from livecam.analysis.keepgil import box_of, copy_into
from livecam.analysis.landmarks import six_keypoints
from livecam.analysis.memory import BoxOnlyMemory, HiddenFaces
from livecam.analysis.networks import DeferredTileSearch, FaceNetworks, TileSearch
from livecam.analysis.observations import (
    Candidate,
    Observation,
    any_overlap,
    as_withheld,
    dedupe,
    merge_candidates,
    mesh_observation,
    overlaps,
)
from livecam.analysis.occluders import Advancing
from livecam.analysis.occlusion import PartlyHidden
from livecam.analysis.people import FacelessPeople
from livecam.analysis.returning import ReturnWatch
from livecam.analysis.roi import (
    Roi,
    box_from_landmarks,
    boxes_from_landmarks,
    roi_from_detection,
)
from livecam.analysis.select import FaceSelector
from livecam.analysis.smooth import LandmarkSmoother
from livecam.analysis.weak_faces import WeakFaces
from livecam.config.analysis import AnalysisConfig
from livecam.core.types import Faces, ImageBGR, Unswappable, WithheldFaces
from livecam.track.bytetrack import ByteTracker, TrackResult
from livecam.track.settings import ByteTrackSettings

log = logging.getLogger(__name__)

# Smoothed landmarks trail the raw mesh by at most this fraction of the face width: more, and
# the swap would sit beside the face it hides (measured: a face re-entering at 40 px/frame on a
# loaded machine was swapped 25 px behind, its real nose and mouth showing).
_MAX_LAG = 0.03


class FaceFollower:
    """Follows faces frame by frame (see the module docstring). Construct cheaply; ``open``
    loads the networks (and starts the search worker in live mode); ``close`` stops it.

    ``search_in_background`` (live mode): the tile search runs on a worker thread and its
    results are merged a frame or two later (unless the search is cheap on the caller's
    thread: ``search.on_caller_thread``, the GPU's); False keeps everything in
    :meth:`follow`, so results do not depend on timing (files, tests). Only the pipeline
    thread calls ``follow``. ``edge_search`` finds faces cut by the frame's edge when
    ``config.edge_search`` is on (default: the detector of ``networks`` on mirrored edge
    strips, :class:`~livecam.analysis.edges.StripSearch`). ``last_timings_ms`` holds the
    latest frame's split (detect, search, edges, mesh, track, smooth, returns, select,
    total).
    """

    def __init__(self, config: AnalysisConfig, networks: FaceNetworks, search: TileSearch, *,
                 fps: float = 30.0, tracker_settings: ByteTrackSettings | None = None,
                 selector: FaceSelector | None = None,
                 search_in_background: bool = False,
                 edge_search: edges.EdgeSearch | None = None) -> None:
        self.config = config
        self.fps = fps
        self.networks = networks
        self.search = search
        self.tracker_settings = tracker_settings or ByteTrackSettings()
        self.background = (BackgroundDetector(search)  # type: ignore[arg-type]
                           if search_in_background and not search.on_caller_thread else None)
        self.tracker = ByteTracker(self.tracker_settings)
        self.smoother = LandmarkSmoother(
            min_cutoff_hz=config.smooth_min_cutoff_hz, beta=config.smooth_beta,
            derivative_cutoff_hz=config.smooth_derivative_cutoff_hz, max_lag=_MAX_LAG)
        self.selector = selector or FaceSelector("all")
        self.last_timings_ms: dict[str, float] = {}
        self.last_frame_detected = False
        self._marks: dict[int, np.ndarray] = {}  # followed track id -> raw landmarks (K, 2)
        self._rois: dict[int, Roi] = {}  # the ROIs of those landmarks, where known
        self._last_marks: dict[int, np.ndarray] = {}  # any track's last raw landmarks
        self._scores: dict[int, float] = {}
        self._box_only = BoxOnlyMemory()
        self._hidden = HiddenFaces(config.lost_cover_frames)
        # the sides of faces a lost face may be behind (behind.py)
        self._beside = behind.BesideLost(config.lost_cover_frames)
        self._returns = ReturnWatch(fps)  # where a face was hidden longer (returning.py)
        self._edges = edges.EdgeMemory()
        self._edge_entry = EdgeEntry()  # bodies entering at a side edge (edge_entry.py)
        self._partly_hidden = PartlyHidden(self.tracker_settings.high_score_threshold)
        self._advancing = Advancing()  # something sliding over a followed face (occluders.py)
        self._weak = WeakFaces()  # weak detections no face accounts for (weak_faces.py)
        # people no face is known of, on frames with none (people.py)
        self._people = FacelessPeople() if config.cover_people else None
        self.edge_search = edge_search or edges.StripSearch(networks)
        self._late: SearchResult | None = None  # the worker's latest result (an older frame)
        self._frames = 0
        self._since_search = 0
        self._last_index: int | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        self.networks.open()
        if self._people is not None:
            self._people.open()
        (self.background or self.search).open()
        self.selector.open()

    def close(self) -> None:
        (self.background or self.search).close()
        self.networks.close()
        self.selector.close()

    # -- one frame ------------------------------------------------------------------------

    def follow(self, image: ImageBGR, index: int) -> tuple[Faces, WithheldFaces]:
        """The faces to swap and the faces withheld in ``image`` (H, W, 3) uint8 BGR, frame
        ``index`` (frame indices, not clocks, drive the smoothing: files decode faster than
        real time). Faces: see :class:`~livecam.analysis.stage.AnalysisStage`."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter_ns()
        first = self._frames == 0
        self._frames += 1
        # frames since the last one followed: live mode under load skips frames, and motion
        # is predicted that far
        gap = 1 if self._last_index is None else max(1, index - self._last_index)
        self._last_index = index
        if self.config.edge_search:  # its pictures go with the frame's first network call
            t = time.perf_counter_ns()
            self.edge_search.ahead(image)
            timings["edges"] = (time.perf_counter_ns() - t) / 1e6
        carried = mesh_runs.carry(self.networks, image, self._marks,
                                  self.tracker.velocities_px(), self._scores, gap, timings,
                                  self._rois)
        whole, searched = self._detect(image, index, first, any_overlap(carried), timings)
        self.last_frame_detected = whole is not None or searched is not None
        strong, weak = self._split_weak(whole)
        cut = self._edge_hits(image, whole, timings)
        changes = self._edge_entries(image, index, timings)
        obs, at_edge = self._observe(image, carried, strong, searched, index, timings, cut,
                                     changes)

        t1 = time.perf_counter_ns()
        # from Python floats: an array of the (4,) arrays would copy each (see keepgil)
        boxes = np.array([o.box_xyxy.tolist() for o in obs], np.float32).reshape(-1, 4)
        scores = np.array([o.score for o in obs], np.float32)
        size = (image.shape[1], image.shape[0])
        result = self.tracker.update(boxes, scores, frame_size_px=size, steps=gap)
        t2 = time.perf_counter_ns()
        timings["track"] = (t2 - t1) / 1e6
        faces, withheld = self._assemble(obs, result, gap / self.fps, size, index, weak)
        known = set(self._scores)
        ids = faces.track_ids.tolist()
        # something sliding over a face from a side (occluders.py), and the face's own
        # detection weaker for it (occlusion.py)
        over = self._advancing.update(image, ids, [box_of(self._marks[t]) for t in ids], known)
        hid = self._partly_hidden.update(faces, whole, known, set(over),
                                         frame_width_px=size[0])
        if hid:  # covered, so no swap is painted on what hides them (occlusion.py)
            keep = np.ones(len(faces), bool)
            keep[hid] = False
            withheld = WithheldFaces.concat([
                withheld, WithheldFaces.from_faces(faces[~keep], Unswappable.NO_MESH)])
            faces = faces[keep]
        if at_edge:  # covered, never tracked (livecam.analysis.edges)
            withheld = WithheldFaces.concat([withheld, as_withheld(at_edge)])
        # (the weak places' covers that ended last frame are watched from this one)
        expired = (self._hidden.expired + self._weak.expired if self._weak.expired
                   else self._hidden.expired)
        if expired or self._returns.watching:
            t = time.perf_counter_ns()
            back = self._returns.update(image, index, expired, faces.boxes_xyxy)
            withheld = WithheldFaces.concat([withheld, back])
            timings["returns"] = (time.perf_counter_ns() - t) / 1e6
        track_score = self.tracker_settings.new_track_score_threshold
        if (self._weak.remembered or self._weak.expired or len(weak)
                or (whole is not None and any(s < track_score for s in whole.scores.tolist()))):
            # a face partly hidden from its first frame: no track, no lost face (weak_faces.py)
            withheld = WithheldFaces.concat([withheld, self._weak.update(
                whole, track_score, faces, withheld, index, size)])
        t3 = time.perf_counter_ns()
        timings["smooth"] = (t3 - t2) / 1e6
        if self._people is not None and not len(faces) and not len(withheld):
            # nothing swapped or covered: a person whose face nothing found (people.py)
            withheld = self._people.covers(image)
            t3, t = time.perf_counter_ns(), t3
            timings["people"] = (t3 - t) / 1e6
        selected = self.selector.select(faces, image)
        timings["select"] = (time.perf_counter_ns() - t3) / 1e6
        timings["total"] = (time.perf_counter_ns() - t0) / 1e6
        self.last_timings_ms = timings
        return selected, withheld

    # -- 2. detect ------------------------------------------------------------------------

    def _detect(self, image: ImageBGR, index: int, first: bool, contested: bool,
                timings: dict[str, float]) -> tuple[Faces | None, SearchResult | None]:
        """This frame's whole-frame detections (None when not run) and a tile search result
        (this frame's, or in live mode an older frame's; None when none is ready)."""
        cfg = self.config
        whole: Faces | None = None
        t = time.perf_counter_ns()
        if cfg.detect_each_frame or first or contested:
            whole = self.networks.detect(image)
            timings["detect"] = (time.perf_counter_ns() - t) / 1e6
        searched: SearchResult | None = None
        # the GPU's search is launched on its due frame and taken on the next: launched one
        # frame sooner, a small face is still found by the frame it was before (its worst
        # case stays N - 1 frames shown as they are); never deferred when N is 1
        deferred = self.search.deferred and cfg.detect_every_n_frames > 1
        due = self._since_search + 1 >= cfg.detect_every_n_frames - int(deferred)
        t = time.perf_counter_ns()
        if first:  # nothing is known yet: look everywhere, now
            searched = (self.background.search_now(image, all_tiles=True)
                        if self.background is not None
                        else self.search.search(image, all_tiles=True))
            self._since_search = 0
        elif self.background is None and deferred:
            # the GPU's search: launched on the frame before it is due, taken on this one (the
            # follower does not wait for it; still the same frames, whatever the timing). Its
            # result is one frame old, not a worker's stale one: a face it found that no mesh
            # confirms is still covered as a box, not dropped
            split = cast(DeferredTileSearch, self.search)
            searched = split.take()
            if due:
                split.launch(image)
                self._since_search = 0
            else:
                self._since_search += 1
        elif self.background is None:
            if due:
                searched = self.search.search(image)
                self._since_search = 0
            else:
                self._since_search += 1
        else:
            done = self.background.take()
            if done is not None:
                searched = self._late = SearchResult(done.faces, done.searched_xyxy)
            if due and self.background.submit(index, image):
                self._since_search = 0
            else:
                self._since_search += 1
        if searched is not None:
            timings["search"] = (time.perf_counter_ns() - t) / 1e6
        if whole is None and searched is not None and not cfg.detect_each_frame:
            # without a whole-frame pass of its own, the search's whole frame stands for it
            whole = searched.faces if self.background is None else None
        return whole, searched

    def _edge_hits(self, image: ImageBGR, whole: Faces | None, timings: dict[str, float],
                   ) -> list[tuple[np.ndarray, float, np.ndarray]]:
        """Faces cut by the frame's edge (:mod:`livecam.analysis.edges`): the detector on the
        mirrored edge strips, and this frame's weak detections, that cross the edge."""
        if not self.config.edge_search:
            return []
        t = time.perf_counter_ns()
        found = self.edge_search.find(image)
        if whole is not None:
            found.append((whole, np.zeros(2, np.float32)))
        hits = edges.edge_hits(found, image, self.tracker_settings.low_score_threshold)
        timings["edges"] = timings.get("edges", 0.0) + (time.perf_counter_ns() - t) / 1e6
        return hits

    def _edge_entries(self, image: ImageBGR, index: int, timings: dict[str, float],
                      ) -> list[tuple[np.ndarray, float, np.ndarray]]:
        """Where a body advanced in over a side edge (:mod:`livecam.analysis.edge_entry`):
        covered as edge hits before the detector scores its sliver."""
        if not self.config.edge_search:
            return []
        t = time.perf_counter_ns()
        hits = self._edge_entry.hits(image, index)
        timings["edges"] = timings.get("edges", 0.0) + (time.perf_counter_ns() - t) / 1e6
        return hits

    def _split_weak(self, whole: Faces | None) -> tuple[Faces | None, np.ndarray]:
        """This frame's detections as candidates (confident) and as evidence (weak: below the
        tracker's high_score_threshold, e.g. a half-hidden face) boxes (M, 4)."""
        if whole is None:
            return None, np.zeros((0, 4), np.float32)
        weak = whole.scores < self.tracker_settings.high_score_threshold
        if not weak.any():  # the usual frame: no copy (detect hands out new arrays each call)
            return whole, whole.boxes_xyxy[weak]
        return whole[~weak], whole.boxes_xyxy[weak]

    # -- 3. admit -------------------------------------------------------------------------

    def _observe(self, image: ImageBGR, carried: list[Observation], whole: Faces | None,
                 searched: SearchResult | None, index: int,
                 timings: dict[str, float],
                 cut: list[tuple[np.ndarray, float, np.ndarray]],
                 changes: list[tuple[np.ndarray, float, np.ndarray]],
                 ) -> tuple[list[Observation], list[tuple[int, Observation, Unswappable]]]:
        """Every face of this frame: followed (mesh) first, then box-only ones; and apart,
        the faces ``cut`` by the frame's edge that no observation is on (withheld NO_MESH
        with no track: :mod:`livecam.analysis.edges`)."""
        followed = mesh_runs.verified(self.networks, image, carried, whole, timings)
        if any_overlap(followed) and whole is not None:
            # crossing: a carried mesh may have slid onto the face in front; a mesh from
            # each detection there decides, the carried ones no detection repeats stay
            near = [i for i in range(len(whole))
                    if overlaps(whole.boxes_xyxy[i], [o.box_xyxy for o in followed])]
            fresh = mesh_runs.meshes_for(self.networks, image, whole, near, timings)
            followed = dedupe([o for o in fresh if o.mesh is not None] + followed)
        candidates: list[Candidate] = []
        if whole is not None:
            candidates += [Candidate(whole.boxes_xyxy[i], float(whole.scores[i]),
                                     whole.keypoints_xy[i]) for i in range(len(whole))]
        if searched is not None:
            # a result the worker hands over describes an older frame: the face may have moved
            stale = searched is self._late
            f = searched.faces
            candidates += [Candidate(f.boxes_xyxy[i], float(f.scores[i]), f.keypoints_xy[i],
                                     from_search=True, stale=stale) for i in range(len(f))]
        known = [o.box_xyxy for o in followed]
        new = [c for c in merge_candidates(candidates) if not overlaps(c.box_xyxy, known)]
        # Hysteresis: a followed face not carried this frame (or lost a while) keeps its
        # place; a detection on it is that face found again and goes first.
        holders = self._place_holders({o.carried_from for o in followed})
        returning = [overlaps(c.box_xyxy, holders) for c in new]
        reserved = sum(1 for b in holders
                       if not overlaps(b, [c.box_xyxy for c, r in zip(new, returning,
                                                                         strict=True) if r]))
        slots = self.config.max_faces - len(followed) - reserved
        admitted: list[Observation] = []
        box_only: list[tuple[Observation, bool]] = []  # (observation, remember it)
        order = [c for _, c in sorted(zip(returning, new, strict=True),
                                      key=lambda rc: (not rc[0], -rc[1].score))]
        t = time.perf_counter_ns()
        for c in order:
            box = np.asarray(c.box_xyxy, np.float32)
            if slots <= 0:
                box_only.append((Observation(box, c.score, reason=Unswappable.OVER_MAX),
                                 c.from_search))
                continue
            mesh = self.networks.landmarks(image, [roi_from_detection(box, c.keypoints_xy)])[0]
            if mesh is not None:
                mesh = mesh_runs.settled(self.networks, image, mesh)
                o = mesh_observation(mesh, c.score, -1)
                if not overlaps(o.box_xyxy, [p.box_xyxy for p in followed + admitted]):
                    admitted.append(o)
                    slots -= 1
                # else: the mesh landed on a followed face: that face, seen again
            elif not c.stale:  # a stale box with no face in it now: the face moved on
                box_only.append((Observation(box, c.score, reason=Unswappable.NO_MESH),
                                 c.from_search))
        timings["mesh"] = timings.get("mesh", 0.0) + (time.perf_counter_ns() - t) / 1e6
        obs = followed + admitted
        seen = [o.box_xyxy for o in obs] + ([] if whole is None else list(whole.boxes_xyxy))
        kept = self._box_only.update(box_only, seen, searched)
        out = obs + [o for o, _ in box_only] + kept
        at_edge: list[tuple[int, Observation, Unswappable]] = []
        if cut or changes or self._edges.remembered:
            h, w = image.shape[:2]
            # hits on a followed face are that face; on a box-only one, kept (edges.py)
            there = [o.box_xyxy for o in out if o.mesh is not None]
            boxed = [o.box_xyxy for o in out if o.mesh is None]
            # an entry touching a followed face is that face's hair or shoulder moving by the
            # edge (edge_entry.py): its cover would lie on the swap
            rows = [b.tolist() for b in there]
            changes = [c for c in changes if not edges.on_face(c[0].tolist(), rows, w, h, 0.0)]
            for box, score, _, age in self._edges.update(cut, index, there, (w, h), boxed,
                                                           changes):
                cover = edges.cover_box(box.tolist(), w, h, age_frames=age)
                at_edge.append((-1, Observation(cover, score, reason=Unswappable.NO_MESH),
                                Unswappable.NO_MESH))
        return out, at_edge

    def _place_holders(self, carried_ids: set[int]) -> list[np.ndarray]:
        """Boxes of the followed faces that hold a place without being seen this frame: those
        followed last frame whose carry failed now, and lost ones still covered."""
        boxes = [box_from_landmarks(m) for tid, m in self._marks.items()
                 if tid not in carried_ids]
        return boxes + self._hidden.holders(exclude=set(self._marks))

    # -- 4. track, smooth, output ---------------------------------------------------------

    def _assemble(self, obs: list[Observation], result: TrackResult, dt_s: float,
                  size: tuple[int, int], index: int, weak: np.ndarray,
                  ) -> tuple[Faces, WithheldFaces]:
        # plain ints and bools: iterating numpy arrays makes a numpy scalar per element
        track_ids, pending_ids = result.track_ids.tolist(), result.pending_track_ids.tolist()
        alive = set(track_ids) | set(pending_ids)
        self._marks, self._rois = {}, {}
        used: set[int] = set()
        rows: list[tuple[int, Observation, bool]] = []  # confirmed, followed
        held: list[tuple[int, Observation, Unswappable]] = []
        for tid, det, new in zip(track_ids, result.det_indices.tolist(),
                                 result.is_new.tolist(), strict=True):
            o = obs[det]
            used.add(det)
            if o.mesh is not None:
                rows.append((tid, o, new))
            else:
                held.append((tid, o, o.reason))
        for tid, det in zip(pending_ids, result.pending_det_indices.tolist(), strict=True):
            o = obs[det]
            used.add(det)
            held.append((tid, o, Unswappable.PENDING if o.mesh is not None else o.reason))
        for j, o in enumerate(obs):  # seen, but no track took it (weak, or a duplicate)
            if j not in used:
                held.append((-1, o, Unswappable.PENDING if o.mesh is not None else o.reason))
        for tid, o, _ in [(t, o, r) for t, o, r in held if t >= 0 and o.mesh is not None]:
            # pending faces are carried too, so the next frame can confirm them
            self._marks[tid] = o.mesh.landmarks_xy  # type: ignore[union-attr]
            self._note_roi(tid, o)
            self._scores[tid] = o.score
        for tid, o, _ in rows:
            assert o.mesh is not None
            self._marks[tid] = o.mesh.landmarks_xy
            self._note_roi(tid, o)
            # a carried observation keeps the score of the detection that started it
            self._scores[tid] = o.score
        self._last_marks.update(self._marks)
        lost_tracks = self.tracker.lost_tracks()
        # a lost face is found again only by a face that is new here (a new or pending
        # track, a box-only face): one followed all along on top of it is the face in front
        # of it (people crossing), and the one behind stays covered
        again = [o.box_xyxy for _, o, new in rows if new] + [o.box_xyxy for _, o, _ in held]
        lost = self._hidden.update(lost_tracks, self._last_marks, size, index, alive, weak,
                                   again, [o.box_xyxy for _, o, _ in rows])
        # a lost face whose cover is on no face in view may be behind one (behind.py)
        covered: list[tuple[int, list[float], int]] = []
        if len(lost):
            unseen = self._hidden.unseen(index)
            covered = [(t, b, unseen[t]) for b, t in zip(lost.boxes_xyxy.tolist(),
                                                      lost.track_ids.tolist(), strict=True)
                       if t in unseen]
        keep = alive | {lt.track_id for lt in lost_tracks} | self._hidden.ids
        beside = self._beside.update(covered, [(t, o.box_xyxy.tolist()) for t, o, _ in rows]
                                     + [(t, o.box_xyxy.tolist()) for t, o, _ in held],
                                     index, keep, lost_tracks, size)
        if len(beside):
            lost = WithheldFaces.concat([lost, beside])
        for d in (self._scores, self._last_marks):
            for tid in [t for t in d if t not in keep]:
                del d[tid]
        faces = self._smoothed(rows, dt_s)
        # (``lost`` is a new object each frame: no empty one made only to be concatenated)
        withheld = WithheldFaces.concat([as_withheld(held), lost]) if held else lost
        return faces, withheld

    def _note_roi(self, tid: int, o: Observation) -> None:
        """Keep the ROI of the landmarks just kept for ``tid``, where known (the next carry's)."""
        if o.roi is not None:
            self._rois[tid] = o.roi

    def _smoothed(self, rows: list[tuple[int, Observation, bool]], dt_s: float) -> Faces:
        self.smoother.keep_only({t for t, _, _ in rows})
        if not rows:
            return Faces.empty()
        # one batch the faces are written into (stacking per-face arrays would copy each,
        # and every copy lets numpy go of the GIL: see keepgil)
        k = rows[0][1].mesh.landmarks_xy.shape[0]  # type: ignore[union-attr]
        xy_arr = np.empty((len(rows), k, 2), np.float32)
        z_arr = np.empty((len(rows), k), np.float32)
        for i, (tid, o, new) in enumerate(rows):
            assert o.mesh is not None
            if new:
                self.smoother.reset(tid)
            if self.config.smoothing:
                self.smoother.smooth(tid, o.mesh.landmarks_xy, o.mesh.landmarks_z, dt_s,
                                     out=(xy_arr[i], z_arr[i]))
            else:
                copy_into(xy_arr[i], o.mesh.landmarks_xy)
                copy_into(z_arr[i], o.mesh.landmarks_z)
        return Faces(boxes_xyxy=boxes_from_landmarks(xy_arr),
                     scores=np.array([o.score for _, o, _ in rows], np.float32),
                     keypoints_xy=six_keypoints(xy_arr), landmarks_xy=xy_arr,
                     landmarks_z=z_arr,
                     track_ids=np.array([t for t, _, _ in rows], np.int64))

"""The classic swap of one face: warp, mask, colour, blend.

:class:`ClassicFaceSwapper` is the per-face worker the swap stage calls. Per face and frame it
does only what depends on the live face: the shape transfer's offsets (``shape.py``), one dense
warp (``warp.py``), a mask built on the warp's coarse grid (face oval, minus the forehead when
asked, minus what the source photo shows that is not its skin when asked), a colour transfer
computed on the same grid (``colour.py``), a sharpness match (``sharpness.py``), the
streamer's own eyes and mouth interior laid in (``features.py``) and one blend over the face
box. Everything about the source was precomputed in :class:`SourceFace`.

Only the pipeline thread calls :meth:`ClassicFaceSwapper.swap_into`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from livecam.analysis import geometry
from livecam.config.swap import SwapConfig
from livecam.swap import accessories, blend, colour, features, sharpness
from livecam.swap.mesh import MeshTopology
from livecam.swap.shape import ShapeTransfer, as_xyz
from livecam.swap.source import SourceFace
from livecam.swap.warp import DenseWarper, WarpResult

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]

# Brow points whose line the forehead-less mask cuts along (MediaPipe: mid right/left brow).
_BROW_LINE = (105, 334)
_FIXED = 4  # sub-pixel bits for cv2.fillPoly on the coarse grid
_FOREHEAD_SKIN_MIN = 0.4  # forehead: auto cuts below this share of skin-like samples
#: warp grid cells across the face width (at least advanced.swap.grid_step_px apart)
_GRID_CELLS = 80
# Colour: the blur near the mask's outer edge, and how far in (both in face widths) the local
# match gives way to the broad one (tuned with the identity judge and the band test).
_EDGE_BLUR = 0.15
_EDGE_BAND = 0.08
_CUT_BAND = 0.15  # the forehead cut crosses the brightest skin: a wider local match there
# inner-lip gap / mouth width below which the live mouth is closed: the source's texture with
# its mouth painted over with its lips is used (``SourceFace.closed_mesh``)
_CLOSED_MOUTH = 0.05
# the live glasses test (``advanced.swap.keep_live_glasses``) on a tracked face: after this
# many frames in a row with neither glasses nor a beard found, only every _CLEAN_EVERY-th frame
# is tested until something is found again (a fifth of the swap's time a face; glasses put on
# show in front at most _CLEAN_EVERY - 1 frames late)
_CLEAN_FRAMES = 8
_CLEAN_EVERY = 3


class AccessoryMemory:
    """One tracked face's live glasses and beard test over time (see ``_CLEAN_FRAMES``):
    a face where the test found nothing for a while is tested on fewer frames. One per
    track; only the pipeline thread uses it."""

    def __init__(self) -> None:
        self._clean_run = 0  # frames tested in a row that found nothing
        self._skipped = 0  # frames skipped since the last test

    def due(self) -> bool:
        """Whether this frame must be tested (counts a skipped frame when not)."""
        if self._clean_run < _CLEAN_FRAMES or self._skipped >= _CLEAN_EVERY - 1:
            return True
        self._skipped += 1
        return False

    def tested(self, found: bool) -> None:
        """Record a test's outcome: ``found`` glasses or a beard."""
        self._clean_run = 0 if found else self._clean_run + 1
        self._skipped = 0


@dataclass(frozen=True, slots=True)
class FaceSwapInfo:
    """What happened to one face (for logs, tests and the benchmark)."""

    swapped: bool
    fade: float  # 1 = fully swapped, 0 = faded out
    kept_mouth: bool
    kept_eyes: bool
    source_sha256: str


def smoothstep(edge0: float, edge1: float, x: float) -> float:
    if edge1 <= edge0:
        return 0.0 if x < edge0 else 1.0
    t = min(max((x - edge0) / (edge1 - edge0), 0.0), 1.0)
    return t * t * (3.0 - 2.0 * t)


def uncovered_turn_deg(source: geometry.HeadPose, target: geometry.HeadPose) -> float:
    """How far (degrees) the live face shows parts of the head the source photo does not.

    A side of the face the source turns away from is foreshortened in its texture; the live
    face needs it when it turns that side towards the camera. So a frontal source covers a
    live face turned either way up to where the mesh itself gets unreliable (the ``|yaw| - 20``
    term), while a source turned 40° left cannot cover a live face looking straight on.
    Pitch has no trustworthy zero from the mesh alone, so only the pitch difference counts.
    """
    ys, yt = source.yaw_deg, target.yaw_deg
    uncovered_yaw = max(max(0.0, ys) - max(0.0, yt), max(0.0, -ys) - max(0.0, -yt))
    uncovered_pitch = abs(target.pitch_deg - source.pitch_deg)
    return max(uncovered_yaw, uncovered_pitch, abs(yt) - 20.0)


class ClassicFaceSwapper:
    """Swaps one face at a time; holds only the topology, the warper and the config."""

    def __init__(self, config: SwapConfig, topology: MeshTopology) -> None:
        self.config = config
        self.topology = topology
        self.warper = DenseWarper(topology, step_px=config.grid_step_px)
        self.shape = ShapeTransfer(topology)

    def fade_for(self, source: SourceFace, pose: geometry.HeadPose) -> float:
        """1 while the source photo covers the live face, falling smoothly to 0 at
        ``fade_end_deg`` of "uncovered turn" (see :func:`uncovered_turn_deg`)."""
        turn = uncovered_turn_deg(source.pose, pose)
        return 1.0 - smoothstep(self.config.fade_start_deg, self.config.fade_end_deg, turn)

    def swap_into(self, out_bgr: ImageBGR, target_bgr: ImageBGR, source: SourceFace,
                  landmarks_xy: FloatArray, landmarks_z: FloatArray,
                  neutral_xyz: npt.NDArray[np.float64] | None = None,
                  colour_memory: colour.ColourMemory | None = None,
                  accessory_memory: AccessoryMemory | None = None) -> FaceSwapInfo:
        """Swap ``source`` onto the face with ``landmarks_xy`` (468+, 2) / ``landmarks_z``.

        Reads the live picture from ``target_bgr`` and writes only ``out_bgr`` (same shape; it
        may be the same array when the caller does not need the original any more). A face
        turned towards ``fade_end_deg`` fades into what ``out_bgr`` already holds there: the
        stage draws the cover there first (``advanced.swap.unswappable``), or leaves the real face.
        ``neutral_xyz`` (468, 3) is the tracked face's neutral shape in this frame's pose
        (:class:`~livecam.swap.shape.NeutralShape`); without it (a photo) the face itself is.
        ``colour_memory`` is the tracked face's colour match over time
        (``advanced.swap.colour_smoothing``); without it (a photo, an untracked face) each call
        matches on its own. ``accessory_memory`` is the tracked face's live glasses test over
        time (:class:`AccessoryMemory`); without it every call tests.
        """
        cfg = self.config
        live_xy = landmarks_xy[:468]
        xy = live_xy
        z = landmarks_z[:468]
        pose = geometry.head_pose(xy, z)
        fade = self.fade_for(source, pose)
        info = FaceSwapInfo(False, fade, False, False, source.photo_sha256)
        if fade <= 0.0:
            return info
        if cfg.shape_transfer > 0.0:
            xy, z = self._shaped(source, xy, z, neutral_xyz)
        frame_hw = (int(target_bgr.shape[0]), int(target_bgr.shape[1]))
        face_w = max(geometry.face_width_px(xy), 8.0)
        # about _GRID_CELLS grid cells across the face whatever its size: the cost stays flat
        step = max(cfg.grid_step_px, int(np.ceil(face_w / _GRID_CELLS)))
        mesh = source.mesh
        if source.closed_mesh is not None and geometry.mouth_openness(live_xy) < _CLOSED_MOUTH:
            mesh = source.closed_mesh  # no teeth of the source's on a closed mouth
        warp = self.warper.warp(mesh, xy, z, frame_hw, step_px=step)
        if warp is None:
            return info
        step = warp.step_px
        outer, cut = self._outer_mask(warp, source, xy)
        kept = self._kept_regions(source, xy, live_xy)
        skin = outer.copy()
        for region in kept:
            self._cut_loop(skin, warp, region.loop_xy, 1.0)
        x1, y1, x2, y2 = warp.box_xyxy
        size = (x2 - x1, y2 - y1)
        target_box = target_bgr[y1:y2, x1:x2]
        glasses = None
        if cfg.keep_live_glasses and (accessory_memory is None or accessory_memory.due()):
            # the streamer's glasses and beard: out of the colour statistics, glasses in front
            box_xy = live_xy - np.array([x1, y1], np.float32)
            dark = accessories.dark_accessories(target_box, box_xy, self.topology,
                                                coarse_reference=True)
            # glasses_alpha(dark, live_xy, (x1, y1)) is the glasses over the box: box_xy's
            worn, glasses = accessories.worn_and_glasses(dark, box_xy, self.topology)
            found = bool(worn.any())
            if accessory_memory is not None:
                accessory_memory.tested(found or glasses is not None)
            if found:  # a clean face's creases and shadows stay in the statistics
                worn_coarse = cv2.resize(worn, (skin.shape[1], skin.shape[0]),
                                         interpolation=cv2.INTER_AREA)
                skin[np.asarray(worn_coarse) > 64] = 0
            # out_bgr may be target_bgr itself: keep the live glasses' pixels before pasting
            live_box = target_box.copy() if glasses is not None else target_box
        face = self._colour(warp, target_box, skin, outer, cut, face_w, size,
                            colour_memory, source.photo_sha256, live_xy)
        if cfg.match_sharpness:
            shown = np.asarray(cv2.resize(skin, size, interpolation=cv2.INTER_NEAREST)) > 0
            face, _gain = sharpness.match_sharpness(face, target_box, shown)
        if kept:
            face = features.keep_streamer(face, target_bgr, warp.box_xyxy, kept,
                                          soft_px=features.KEPT_EDGE_FRACTION * face_w)
        if cfg.blend == "seamless":
            hard = np.asarray(cv2.resize(outer, size, interpolation=cv2.INTER_NEAREST), np.uint8)
            erode = max(1, int(face_w * cfg.feather * 0.5))
            hard = np.asarray(cv2.erode(hard, np.ones((erode, erode), np.uint8)), np.uint8)
            face_u8 = face
            if fade < 1.0:
                # Poisson blending has no opacity: mix the faded face first, with what is
                # under it in the output (the cover the stage drew, see advanced.swap.unswappable)
                face_u8 = np.asarray(cv2.addWeighted(face_u8, fade, out_bgr[y1:y2, x1:x2],
                                                     1.0 - fade, 0.0), np.uint8)
            blend.seamless_paste_into(out_bgr, face_u8, hard, warp.box_xyxy)
        else:
            feather_px = cfg.feather * face_w / step
            alpha_coarse = blend.feather_mask(outer, erode_px=feather_px * 0.75 + 1.0,
                                              blur_px=feather_px)
            alpha = np.asarray(cv2.resize(alpha_coarse, size, interpolation=cv2.INTER_LINEAR),
                               np.float32)
            if fade < 1.0:
                alpha *= fade
            blend.paste_back_into(out_bgr, face, alpha, warp.box_xyxy)
        if glasses is not None:
            blend.paste_back_into(out_bgr, live_box, glasses * fade, warp.box_xyxy)
        kept_names = {r.name for r in kept}
        return FaceSwapInfo(True, fade, "mouth" in kept_names,
                            bool(kept_names & {"eye_right", "eye_left"}), source.photo_sha256)

    def _shaped(self, source: SourceFace, xy: FloatArray, z: FloatArray,
                neutral_xyz: npt.NDArray[np.float64] | None) -> tuple[FloatArray, FloatArray]:
        """The live mesh with the shape transfer's offsets added (see ``shape.py``). The lips
        move as one piece and the streamer's mouth interior moves along (:meth:`_kept_regions`);
        the eyes stay where the streamer's are when the streamer's eyes are shown (moved, the
        kept eyes trembled with every frame's small change of the offsets: test_temporal)."""
        live = as_xyz(xy, z)
        off = self.shape.offsets(live if neutral_xyz is None else neutral_xyz, source.xyz,
                                 strength=self.config.shape_transfer, mouth_weight=1.0,
                                 move_eyes=not self._keeps_eyes(source))
        shaped = (live + off).astype(np.float32)
        return shaped[:, :2], shaped[:, 2]

    def _keeps_eyes(self, source: SourceFace) -> bool:
        cfg = self.config
        return cfg.keep_eyes == "always" or (
            cfg.keep_eyes == "auto" and min(source.eyes_open) < cfg.eye_closed_threshold)

    def _kept_regions(self, source: SourceFace, xy: FloatArray,
                      live_xy: FloatArray) -> list[features.KeptRegion]:
        """The streamer's own eyes (inside the lids: gaze, blinks) and mouth interior (teeth,
        tongue), at the shaped mesh's place (``xy``), read from the live face (``live_xy``)."""
        cfg = self.config
        topo = self.topology
        loops: list[tuple[str, npt.NDArray[np.int32], float]] = []
        if self._keeps_eyes(source):
            loops += [("eye_right", topo.eye_right, 1.0), ("eye_left", topo.eye_left, 1.0)]
        if cfg.keep_mouth and geometry.mouth_openness(live_xy) >= cfg.mouth_open_threshold:
            loops.append(("mouth", topo.mouth_inner, cfg.mouth_size))
        return [features.kept_region(name, xy[loop], live_xy[loop], scale)
                for name, loop, scale in loops]

    def _grid(self, warp: WarpResult, points_xy: FloatArray) -> npt.NDArray[np.int32]:
        x1, y1 = warp.box_xyxy[:2]
        grid = (points_xy - np.array([x1, y1], np.float32) + 0.5) / warp.step_px - 0.5
        return np.round(grid * (1 << _FIXED)).astype(np.int32)

    def _outer_mask(self, warp: WarpResult, source: SourceFace, xy: FloatArray,
                    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8] | None]:
        """Hard 0/255 mask on the coarse grid: face oval ∩ mesh, minus the forehead when cut;
        and the cut-off region (255) or None."""
        cfg = self.config
        mask = np.zeros(warp.coarse_shape, np.uint8)
        cv2.fillPoly(mask, [self._grid(warp, xy[self.topology.face_oval])], (255,), cv2.LINE_8,
                     _FIXED)
        mask[warp.tri_id_coarse == 0] = 0
        if source.usable_u8 is not None:
            # the source's hair, background and hidden skin stay out: the live skin shows there
            remap: Any = cv2.remap  # the stubs lack the (map1=CV_32FC2, map2=None) form
            usable = remap(source.usable_u8, warp.map_coarse, None, cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=(0,))
            mask[np.asarray(usable) < 128] = 0
        cut = None
        if cfg.forehead == "cut" or (cfg.forehead == "auto"
                                     and source.forehead_skin < _FOREHEAD_SKIN_MIN):
            kept = np.full(warp.coarse_shape, 255, np.uint8)
            self._cut_forehead(kept, warp, xy)
            cut = np.asarray(255 - kept, np.uint8)
            mask &= kept
        return mask, cut

    def _cut_loop(self, mask: npt.NDArray[np.uint8], warp: WarpResult, loop_xy: FloatArray,
                  scale: float) -> None:
        centre = loop_xy.mean(axis=0)
        grown = centre + (loop_xy - centre) * scale
        cv2.fillPoly(mask, [self._grid(warp, grown)], (0,), cv2.LINE_8, _FIXED)

    def _cut_forehead(self, mask: npt.NDArray[np.uint8], warp: WarpResult,
                      xy: FloatArray) -> None:
        """Zero everything above a line just over the eyebrows (follows head roll)."""
        a, b = xy[_BROW_LINE[0]], xy[_BROW_LINE[1]]
        along = b - a
        length = float(np.linalg.norm(along))
        if length < 1e-6:
            return
        along /= length
        up = np.array([along[1], -along[0]], np.float32)  # image "up" for an upright face
        if float(np.dot(up, xy[10] - xy[152])) < 0:  # make it point from chin to forehead
            up = -up
        lift = 0.1 * length
        p, q = a + up * lift - along * length * 2, b + up * lift + along * length * 2
        far = length * 10
        quad = np.array([p, q, q + up * far, p + up * far], np.float32)
        cv2.fillPoly(mask, [self._grid(warp, quad)], (0,), cv2.LINE_8, _FIXED)

    def _colour(self, warp: WarpResult, target_box: ImageBGR, skin: npt.NDArray[np.uint8],
                outer: npt.NDArray[np.uint8], cut: npt.NDArray[np.uint8] | None, face_w: float,
                size: tuple[int, int], memory: colour.ColourMemory | None = None,
                source_key: str = "", live_xy: FloatArray | None = None) -> ImageBGR:
        """The warped face, colour matched, (h, w, 3) uint8 over the box. ``skin`` is the
        coarse mask the statistics use (kept eyes and mouth cut out), ``outer`` the mask the
        face is blended with (its edge is where the colours must meet), ``cut`` the forehead
        cut off (its straight edge across the brightest skin needs a wider local match).
        ``memory`` smooths the lab match over frames (``source_key``: the source photo;
        ``live_xy``: the live face's mesh, which the past match is moved with)."""
        cfg = self.config
        warped = warp.warped_bgr
        if cfg.colour == "none":
            return warped
        wc, hc = warp.coarse_shape[1], warp.coarse_shape[0]
        small_src = np.asarray(cv2.resize(warped, (wc, hc), interpolation=cv2.INTER_AREA),
                               np.uint8)
        small_tgt = np.asarray(cv2.resize(target_box, (wc, hc), interpolation=cv2.INTER_AREA),
                               np.uint8)
        weight = (skin > 0).astype(np.float32)
        if cfg.colour == "meanstd":
            scale, offset = colour.meanstd_transfer(small_src, small_tgt, weight)
            return colour.apply_lab_affine(warped, scale, offset)
        blur = cfg.colour_blur * face_w / warp.step_px
        if cfg.colour == "lowfreq":
            gain = colour.lowfreq_gain(small_src, small_tgt, weight, blur)
            gain_full = cv2.resize(gain, size, interpolation=cv2.INTER_LINEAR)
            # mixed-type multiply saturates to uint8 in one pass
            return np.asarray(cv2.multiply(warped, gain_full, dtype=cv2.CV_8U), np.uint8)
        # lab: local near the outer edge (the seam), broad inside (the source's own look)
        cells = face_w / warp.step_px
        dist = np.asarray(cv2.distanceTransform(outer, cv2.DIST_L2, 3), np.float32)
        edge_weight = 1.0 - np.clip(dist / max(_EDGE_BAND * cells, 1.0), 0.0, 1.0)
        if cut is not None:
            to_cut = np.asarray(cv2.distanceTransform(255 - cut, cv2.DIST_L2, 3), np.float32)
            np.maximum(edge_weight, 1.0 - np.clip(to_cut / max(_CUT_BAND * cells, 1.0), 0.0, 1.0),
                       out=edge_weight)
        src_lab = np.asarray(cv2.cvtColor(small_src, cv2.COLOR_BGR2LAB), np.float32)
        tgt_lab = np.asarray(cv2.cvtColor(small_tgt, cv2.COLOR_BGR2LAB), np.float32)
        match = colour.lab_transfer(src_lab, tgt_lab, weight, blur_px=blur,
                                    edge_blur_px=_EDGE_BLUR * face_w / warp.step_px,
                                    edge_weight=edge_weight,
                                    relight_blur_px=cfg.relight * face_w / warp.step_px)
        if memory is not None and live_xy is not None:
            x1, y1 = warp.box_xyxy[:2]
            centre = live_xy.mean(axis=0)
            match = memory.smooth_match(
                source_key, match, 1.0 - cfg.colour_smoothing,
                grid=(float(x1), float(y1), float(warp.step_px)),
                anchor=(float(centre[0]), float(centre[1]), float(geometry.face_width_px(live_xy))))
        bias_full = np.asarray(cv2.resize(match.bias, size, interpolation=cv2.INTER_LINEAR),
                               np.float32)
        return colour.apply_lab_transfer(warped, replace(match, bias=bias_full))

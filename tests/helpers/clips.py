"""Moving-face clips built from real photos, with exact ground truth (for tests and benchmarks).

    sprites = face_sprites(astronaut_bgr) + face_sprites(t1_bgr)
    frames, truth = make_clip(sprites[:2], [Trajectory.linear((200, 300), (1000, 300), 60, 120),
                                            Trajectory.linear((1000, 320), (200, 320), 60, 120)],
                              size=(1280, 720))

A sprite is a face cut from a photo with a soft elliptical edge; trajectories say where its face
box centre is, how wide the face is, whether it is shown and how far it is turned (a
perspective warp of the flat photo about its vertical axis), frame by frame. Later sprites are
drawn over earlier ones. ``truth[t]`` lists the faces a viewer would call visible in frame t
(id = sprite index + 1, box = the face's landmark box, the same kind of box livecam outputs),
with the share of each face's box on screen and uncovered, and the mask of those pixels.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from livecam.core.types import ImageBGR
from livecam.subcommands.demo_sprites import FaceSprite, background, face_sprites

__all__ = ["VISIBLE_FRACTION", "FaceSprite", "FrameTruth", "Occluder", "Trajectory", "background",
           "box_region", "face_sprites",
           "make_clip", "render_clip", "score_tracking", "tracking_scenarios"]

# A face counts as visible when at least this fraction of its box is on screen and uncovered.
VISIBLE_FRACTION = 0.5


@dataclass(frozen=True)
class Trajectory:
    """Per frame: face box centre ``centers_xy`` (T, 2) px, ``face_widths_px`` (T,), ``shown``
    (T,) bool (False = not drawn at all, e.g. left the scene), ``yaw_deg`` (T,) how far the
    face is turned about its vertical axis (positive: its right side goes away)."""

    centers_xy: np.ndarray
    face_widths_px: np.ndarray
    shown: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    yaw_deg: np.ndarray = field(default_factory=lambda: np.zeros(0, float))

    def __post_init__(self) -> None:
        n = len(self.centers_xy)
        if len(self.shown) == 0:
            object.__setattr__(self, "shown", np.ones(n, bool))
        if len(self.yaw_deg) == 0:
            object.__setattr__(self, "yaw_deg", np.zeros(n, float))
        if len(self.face_widths_px) != n or len(self.shown) != n or len(self.yaw_deg) != n:
            raise ValueError("centers_xy, face_widths_px, shown and yaw_deg must have one row "
                             "per frame")

    @classmethod
    def linear(cls, start_xy: tuple[float, float], end_xy: tuple[float, float], n_frames: int,
               face_width_px: float, end_face_width_px: float | None = None) -> Trajectory:
        """Constant-velocity motion (and linear change of size) over ``n_frames``."""
        s = np.linspace(0.0, 1.0, n_frames)[:, None]
        centers = (1 - s) * np.asarray(start_xy, float) + s * np.asarray(end_xy, float)
        end_w = face_width_px if end_face_width_px is None else end_face_width_px
        widths = np.linspace(face_width_px, end_w, n_frames)
        return cls(centers, widths)

    @classmethod
    def still(cls, center_xy: tuple[float, float], n_frames: int, face_width_px: float,
              ) -> Trajectory:
        return cls.linear(center_xy, center_xy, n_frames, face_width_px)

    def hidden(self, start: int, stop: int) -> Trajectory:
        """A copy not drawn in frames [start, stop)."""
        shown = self.shown.copy()
        shown[start:stop] = False
        return Trajectory(self.centers_xy, self.face_widths_px, shown, self.yaw_deg)

    def turning(self, yaw_deg: np.ndarray) -> Trajectory:
        """A copy turned by ``yaw_deg`` (T,) degrees frame by frame."""
        return Trajectory(self.centers_xy, self.face_widths_px, self.shown,
                          np.asarray(yaw_deg, float))


@dataclass(frozen=True)
class Occluder:
    """A flat rectangle drawn over everything in frames [start, stop)."""

    box_xyxy: tuple[int, int, int, int]
    start: int
    stop: int
    color_bgr: tuple[int, int, int] = (60, 90, 120)


@dataclass(frozen=True)
class FrameTruth:
    """Visible faces of one frame: ``ids`` (n,) int64 (sprite index + 1), ``boxes_xyxy`` (n, 4),
    ``fractions`` (n,) float32: the share of each face's box on screen and uncovered (1.0 =
    fully visible), ``masks``: per face a bool array over its box clipped to the frame
    (:func:`box_region`), True where the face itself is seen."""

    ids: np.ndarray
    boxes_xyxy: np.ndarray
    fractions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    masks: tuple[np.ndarray, ...] = ()
    #: Every face drawn in the frame, visible or not (id, box, and the bool mask over its
    #: :func:`box_region` where an :class:`Occluder` hides it): where a hidden face's swap
    #: must not be painted (a *ghost*, judged by ``tests.helpers.leak_judge``).
    drawn: tuple[tuple[int, np.ndarray, np.ndarray], ...] = ()


def box_region(box_xyxy: np.ndarray, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """A face box rounded and clipped to a (W, H) frame: the pixels ``FrameTruth.masks`` cover."""
    w, h = size
    x1, y1 = max(0, round(float(box_xyxy[0]))), max(0, round(float(box_xyxy[1])))
    x2, y2 = min(w, round(float(box_xyxy[2]))), min(h, round(float(box_xyxy[3])))
    return x1, y1, max(x1, x2), max(y1, y2)


# A turned face is drawn as the flat photo seen from this far (in face widths): near enough
# for the perspective to make the far side smaller, as a real head's does.
_VIEW_DISTANCE_FACES = 3.0


def _project(m: np.ndarray, points_xy: np.ndarray) -> np.ndarray:
    """(N, 2) points through the (3, 3) homography ``m``."""
    p = np.c_[points_xy, np.ones(len(points_xy))] @ m.T
    return np.asarray(p[:, :2] / p[:, 2:], np.float64)


def _placement(sprite: FaceSprite, traj: Trajectory, t: int) -> np.ndarray:
    """The (3, 3) sprite-to-frame homography of frame ``t``: scaled to the face width, face box
    centre on the trajectory, turned by its yaw (a perspective view of the flat sprite)."""
    fb = sprite.face_box_xyxy
    scale = float(traj.face_widths_px[t]) / float(fb[2] - fb[0])
    cx, cy = (float(v) for v in traj.centers_xy[t])
    fcx, fcy = (fb[0] + fb[2]) / 2, (fb[1] + fb[3]) / 2
    # sprite -> face-centred, scaled plane
    to_plane = np.array([[scale, 0, -scale * fcx], [0, scale, -scale * fcy], [0, 0, 1]])
    yaw = np.radians(float(traj.yaw_deg[t]))
    d = _VIEW_DISTANCE_FACES * float(traj.face_widths_px[t])
    # rotate the plane about its vertical axis and project from distance d:
    # x' = d u cos / (d + u sin), y' = d v / (d + u sin)
    turn = np.array([[d * np.cos(yaw), 0, 0], [0, d, 0], [np.sin(yaw), 0, d]])
    to_frame = np.array([[1, 0, cx], [0, 1, cy], [0, 0, 1]])
    return np.asarray(to_frame @ turn @ to_plane, np.float64)

def make_clip(sprites: Sequence[FaceSprite], trajectories: Sequence[Trajectory],
              size: tuple[int, int], *, occluders: Sequence[Occluder] = (),
              noise_sigma: float = 0.0, seed: int = 0, backdrop_bgr: ImageBGR | None = None,
              ) -> tuple[list[ImageBGR], list[FrameTruth]]:
    """Render the clip. ``size`` is (W, H). Sprite i follows trajectory i (same length T).

    ``noise_sigma`` adds per-frame Gaussian sensor noise (grey levels). Returns T frames
    (H, W, 3) uint8 and T :class:`FrameTruth`.
    """
    frames: list[ImageBGR] = []
    truth: list[FrameTruth] = []
    for frame, frame_truth in render_clip(sprites, trajectories, size, occluders=occluders,
                                          noise_sigma=noise_sigma, seed=seed,
                                          backdrop_bgr=backdrop_bgr):
        frames.append(frame)
        truth.append(frame_truth)
    return frames, truth


def render_clip(sprites: Sequence[FaceSprite], trajectories: Sequence[Trajectory],
                size: tuple[int, int], *, occluders: Sequence[Occluder] = (),
                noise_sigma: float = 0.0, seed: int = 0, backdrop_bgr: ImageBGR | None = None,
                min_visible: float = VISIBLE_FRACTION,
                ) -> Iterator[tuple[ImageBGR, FrameTruth]]:
    """:func:`make_clip` one frame at a time (long HD clips need not fit in memory).

    ``min_visible``: a face is listed in the truth when at least this share of its box is on
    screen and uncovered (0: from its first visible pixel)."""
    if len(sprites) != len(trajectories):
        raise ValueError(f"{len(sprites)} sprites but {len(trajectories)} trajectories")
    n_frames = len(trajectories[0].centers_xy)
    if any(len(t.centers_xy) != n_frames for t in trajectories):
        raise ValueError("every trajectory must have the same number of frames")
    import cv2

    w, h = size
    base = background(size, seed) if backdrop_bgr is None else backdrop_bgr
    rng = np.random.default_rng(seed + 1)
    # sensor noise: fresh draws are most of a frame's cost at HD, so frames take a few
    # precomputed fields in turn, each moved by a random offset (no frame repeats another's)
    bank = [rng.normal(0.0, noise_sigma, (h, w, 3)).astype(np.float32)
            for _ in range(min(4, n_frames))] if noise_sigma > 0 else []
    for t in range(n_frames):
        canvas: np.ndarray = base.astype(np.float32)
        # owner[y, x]: index of the face drawn top-most there (-1 backdrop, -2 occluder)
        owner: np.ndarray = np.full((h, w), -1, np.int32)
        boxes: list[np.ndarray | None] = []
        for k, (sprite, traj) in enumerate(zip(sprites, trajectories, strict=True)):
            if not traj.shown[t]:
                boxes.append(None)
                continue
            fb = sprite.face_box_xyxy
            m = _placement(sprite, traj, t)
            sh, sw = sprite.alpha.shape
            # only the sprite's own region of the frame is warped and blended
            outline = _project(m, np.array([[0, 0], [sw, 0], [0, sh], [sw, sh]], np.float64))
            x0, y0 = max(0, int(outline[:, 0].min())), max(0, int(outline[:, 1].min()))
            x1 = min(w, int(np.ceil(outline[:, 0].max())) + 1)
            y1 = min(h, int(np.ceil(outline[:, 1].max())) + 1)
            face = _project(m, np.array([[fb[0], fb[1]], [fb[2], fb[1]], [fb[0], fb[3]],
                                         [fb[2], fb[3]]], np.float64))
            boxes.append(np.array([*face.min(axis=0), *face.max(axis=0)], np.float32))
            if x1 <= x0 or y1 <= y0:
                continue
            local = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], np.float64) @ m
            roi = (x1 - x0, y1 - y0)
            img = cv2.warpPerspective(sprite.image_bgr, local, roi, flags=cv2.INTER_LINEAR,
                                      borderMode=cv2.BORDER_CONSTANT)
            alpha = cv2.warpPerspective(sprite.alpha, local, roi, flags=cv2.INTER_LINEAR,
                                        borderMode=cv2.BORDER_CONSTANT)[:, :, None]
            part = canvas[y0:y1, x0:x1]
            part += (img.astype(np.float32) - part) * alpha
            owner[y0:y1, x0:x1][alpha[:, :, 0] > 0.5] = k
        for occ in occluders:
            if occ.start <= t < occ.stop:
                x1, y1, x2, y2 = occ.box_xyxy
                canvas[max(0, y1):y2, max(0, x1):x2] = occ.color_bgr
                owner[max(0, y1):y2, max(0, x1):x2] = -2
        if bank:
            shift = (int(rng.integers(0, h)), int(rng.integers(0, w)))
            canvas += np.roll(bank[t % len(bank)], shift, axis=(0, 1))
        frame = np.clip(canvas + 0.5, 0, 255).astype(np.uint8)
        ids, visible_boxes, fractions, masks = [], [], [], []
        drawn = []
        for k, box in enumerate(boxes):
            if box is None:
                continue
            full_area = float((box[2] - box[0]) * (box[3] - box[1]))
            x1, y1, x2, y2 = box_region(box, size)
            mine = owner[y1:y2, x1:x2] == k
            drawn.append((k + 1, box, owner[y1:y2, x1:x2] == -2))
            seen = float(mine.sum())
            if full_area > 0 and seen > 0 and seen / full_area >= min_visible:
                ids.append(k + 1)
                visible_boxes.append(box)
                fractions.append(min(1.0, seen / full_area))
                masks.append(mine)
        yield frame, FrameTruth(np.array(ids, np.int64),
                                np.array(visible_boxes, np.float32).reshape(-1, 4),
                                np.array(fractions, np.float32), tuple(masks), tuple(drawn))


def score_tracking(truth: Sequence[FrameTruth], predicted_ids: Sequence[np.ndarray],
                   predicted_boxes: Sequence[np.ndarray], *, min_iou: float = 0.3,
                   ) -> dict[str, float]:
    """CLEAR-MOT and ID metrics with ``motmetrics``: mota, idf1, num_switches, ... per clip.

    The IoU distance matrix is computed here (NaN = cannot match), which also works where
    ``motmetrics.distances.iou_matrix`` does not (numpy 2).
    """
    import motmetrics as mm

    from livecam.track.bytetrack import iou_matrix

    acc = mm.MOTAccumulator(auto_id=True)
    for gt, ids, boxes in zip(truth, predicted_ids, predicted_boxes, strict=True):
        iou = iou_matrix(gt.boxes_xyxy, np.asarray(boxes).reshape(-1, 4))
        dist = np.where(iou >= min_iou, 1.0 - iou, np.nan)
        acc.update(gt.ids.tolist(), np.asarray(ids).tolist(), dist)
    names = ["mota", "idf1", "num_switches", "num_false_positives", "num_misses",
             "num_fragmentations", "num_frames", "num_objects"]
    summary = mm.metrics.create().compute(acc, metrics=names, name="clip")
    return {k: float(summary[k].iloc[0]) for k in names}


def tracking_scenarios(n_frames: int = 60, size: tuple[int, int] = (960, 540),
                       face_width_px: float = 150.0,
                       ) -> dict[str, tuple[list[Trajectory], list[Occluder]]]:
    """The standard tracking clips: name -> (trajectories, occluders) for ``make_clip``.

    ``moving``: one face crossing the frame diagonally. ``crossing``: two faces walking past
    each other at almost the same height (the second passes in front and hides the first).
    ``occlusion``: a face hidden behind a board for 15 frames while it keeps walking.
    ``leave_reenter``: a face walks out at the right edge and comes back 20 frames later.
    ``scale``: a face walking towards the camera, growing to ~2.3x its width.
    """
    w, h = size
    fw = face_width_px
    t = n_frames
    y = h / 2
    margin = fw * 0.8
    moving = Trajectory.linear((margin, y - 60), (w - margin, y + 60), t, fw)
    cross_a = Trajectory.linear((margin, y - 15), (w - margin, y - 15), t, fw)
    cross_b = Trajectory.linear((w - margin, y + 15), (margin, y + 15), t, fw)
    walk = Trajectory.linear((margin, y), (w - margin, y), t, fw)
    hide_from = t // 3
    board = Occluder((0, 0, w, h), hide_from, hide_from + 15)
    # out at the right edge, back 20 frames later the way it left
    half = t // 2
    out_xy = np.r_[np.linspace(w * 0.55, w + fw, half), np.full(20, w + fw),
                   np.linspace(w + fw, w * 0.55, t - half - 20)]
    leave = Trajectory(np.stack([out_xy, np.full(t, y)], 1), np.full(t, fw),
                       np.r_[np.ones(half, bool), np.zeros(20, bool), np.ones(t - half - 20, bool)])
    grow = Trajectory.linear((w * 0.35, y), (w * 0.6, y), t, fw * 0.7, min(h * 0.55, fw * 1.6))
    return {
        "moving": ([moving], []),
        "crossing": ([cross_a, cross_b], []),
        "occlusion": ([walk], [board]),
        "leave_reenter": ([leave], []),
        "scale": ([grow], []),
    }

"""Moving-face clips built from real photos, with exact ground truth (for tests and benchmarks).

    sprites = face_sprites(astronaut_bgr) + face_sprites(t1_bgr)
    frames, truth = make_clip(sprites[:2], [Trajectory.linear((200, 300), (1000, 300), 60, 120),
                                            Trajectory.linear((1000, 320), (200, 320), 60, 120)],
                              size=(1280, 720))

A sprite is a face cut from a photo with a soft elliptical edge; trajectories say where its face
box centre is, how wide the face is and whether it is shown, frame by frame. Later sprites are
drawn over earlier ones. ``truth[t]`` lists the faces a viewer would call visible in frame t
(id = sprite index + 1, box = the face's landmark box, the same kind of box livecam outputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from livecam.core.types import ImageBGR

# A face counts as visible when at least this fraction of its box is on screen and uncovered.
VISIBLE_FRACTION = 0.5


@dataclass(frozen=True)
class FaceSprite:
    """A face cut from a photo: ``image_bgr`` (h, w, 3) uint8, ``alpha`` (h, w) float32 in
    [0, 1], ``face_box_xyxy`` (4,) float32 px inside the sprite (the landmark box)."""

    image_bgr: ImageBGR
    alpha: np.ndarray
    face_box_xyxy: np.ndarray


@dataclass(frozen=True)
class Trajectory:
    """Per frame: face box centre ``centers_xy`` (T, 2) px, ``face_widths_px`` (T,), ``shown``
    (T,) bool (False = not drawn at all, e.g. left the scene)."""

    centers_xy: np.ndarray
    face_widths_px: np.ndarray
    shown: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __post_init__(self) -> None:
        n = len(self.centers_xy)
        if len(self.shown) == 0:
            object.__setattr__(self, "shown", np.ones(n, bool))
        if len(self.face_widths_px) != n or len(self.shown) != n:
            raise ValueError("centers_xy, face_widths_px and shown must have one row per frame")

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
        return Trajectory(self.centers_xy, self.face_widths_px, shown)


@dataclass(frozen=True)
class Occluder:
    """A flat rectangle drawn over everything in frames [start, stop)."""

    box_xyxy: tuple[int, int, int, int]
    start: int
    stop: int
    color_bgr: tuple[int, int, int] = (60, 90, 120)


@dataclass(frozen=True)
class FrameTruth:
    """Visible faces of one frame: ``ids`` (n,) int64 (sprite index + 1), ``boxes_xyxy`` (n, 4)."""

    ids: np.ndarray
    boxes_xyxy: np.ndarray


def face_sprites(photo_bgr: ImageBGR, *, margin: float = 0.45, max_faces: int = 8,
                 ) -> list[FaceSprite]:
    """Cut every face of a photo (found by livecam's own ``analyze_photo``), largest first."""
    from livecam.analysis.photo import analyze_photo

    faces = analyze_photo(photo_bgr, max_faces=max_faces)
    h, w = photo_bgr.shape[:2]
    sprites = []
    for box in faces.boxes_xyxy:
        bw, bh = box[2] - box[0], box[3] - box[1]
        x0 = max(0, int(box[0] - margin * bw))
        y0 = max(0, int(box[1] - margin * bh))
        x1 = min(w, int(box[2] + margin * bw) + 1)
        y1 = min(h, int(box[3] + margin * bh) + 1)
        crop = np.ascontiguousarray(photo_bgr[y0:y1, x0:x1])
        ch, cw = crop.shape[:2]
        yy, xx = np.mgrid[0:ch, 0:cw].astype(np.float32)
        # soft ellipse: 1 inside the face, fading to 0 at the crop edge
        r = np.hypot((xx - cw / 2) / (cw / 2), (yy - ch / 2) / (ch / 2))
        alpha = np.clip((1.0 - r) / 0.25, 0.0, 1.0).astype(np.float32)
        local = np.array([box[0] - x0, box[1] - y0, box[2] - x0, box[3] - y0], np.float32)
        sprites.append(FaceSprite(crop, alpha, local))
    return sprites


def background(size: tuple[int, int], seed: int = 0) -> ImageBGR:
    """A face-free backdrop (W, H): smooth colour gradient plus fixed low-contrast texture."""
    w, h = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([90 + 60 * xx / w, 110 + 40 * yy / h, 130 - 50 * xx / w], axis=2)
    texture = rng.normal(0, 6, (h // 8 + 1, w // 8 + 1, 1)).repeat(8, 0).repeat(8, 1)[:h, :w]
    return np.clip(base + texture, 0, 255).astype(np.uint8)


def make_clip(sprites: Sequence[FaceSprite], trajectories: Sequence[Trajectory],
              size: tuple[int, int], *, occluders: Sequence[Occluder] = (),
              noise_sigma: float = 0.0, seed: int = 0, backdrop_bgr: ImageBGR | None = None,
              ) -> tuple[list[ImageBGR], list[FrameTruth]]:
    """Render the clip. ``size`` is (W, H). Sprite i follows trajectory i (same length T).

    ``noise_sigma`` adds per-frame Gaussian sensor noise (grey levels). Returns T frames
    (H, W, 3) uint8 and T :class:`FrameTruth`.
    """
    if len(sprites) != len(trajectories):
        raise ValueError(f"{len(sprites)} sprites but {len(trajectories)} trajectories")
    n_frames = len(trajectories[0].centers_xy)
    if any(len(t.centers_xy) != n_frames for t in trajectories):
        raise ValueError("every trajectory must have the same number of frames")
    import cv2

    w, h = size
    base = background(size, seed) if backdrop_bgr is None else backdrop_bgr
    rng = np.random.default_rng(seed + 1)
    frames: list[ImageBGR] = []
    truth: list[FrameTruth] = []
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
            scale = float(traj.face_widths_px[t]) / float(fb[2] - fb[0])
            cx, cy = traj.centers_xy[t]
            # sprite-to-frame: x' = scale * x + tx, face box centre lands on (cx, cy)
            tx = cx - scale * (fb[0] + fb[2]) / 2
            ty = cy - scale * (fb[1] + fb[3]) / 2
            m = np.array([[scale, 0, tx], [0, scale, ty]], np.float32)
            img = cv2.warpAffine(sprite.image_bgr, m, (w, h), flags=cv2.INTER_LINEAR,
                                 borderMode=cv2.BORDER_CONSTANT)
            alpha = cv2.warpAffine(sprite.alpha, m, (w, h), flags=cv2.INTER_LINEAR,
                                   borderMode=cv2.BORDER_CONSTANT)[:, :, None]
            canvas = canvas * (1 - alpha) + img.astype(np.float32) * alpha
            owner[alpha[:, :, 0] > 0.5] = k
            boxes.append(np.array([scale * fb[0] + tx, scale * fb[1] + ty,
                                   scale * fb[2] + tx, scale * fb[3] + ty], np.float32))
        for occ in occluders:
            if occ.start <= t < occ.stop:
                x1, y1, x2, y2 = occ.box_xyxy
                canvas[max(0, y1):y2, max(0, x1):x2] = occ.color_bgr
                owner[max(0, y1):y2, max(0, x1):x2] = -2
        if noise_sigma > 0:
            canvas = canvas + rng.normal(0.0, noise_sigma, canvas.shape)
        frames.append(np.clip(canvas + 0.5, 0, 255).astype(np.uint8))
        ids, visible_boxes = [], []
        for k, box in enumerate(boxes):
            if box is None:
                continue
            full_area = float((box[2] - box[0]) * (box[3] - box[1]))
            x1, y1 = max(0, round(float(box[0]))), max(0, round(float(box[1])))
            x2, y2 = min(w, round(float(box[2]))), min(h, round(float(box[3])))
            seen = float((owner[y1:y2, x1:x2] == k).sum()) if x2 > x1 and y2 > y1 else 0.0
            if full_area > 0 and seen / full_area >= VISIBLE_FRACTION:
                ids.append(k + 1)
                visible_boxes.append(box)
        truth.append(FrameTruth(np.array(ids, np.int64),
                                np.array(visible_boxes, np.float32).reshape(-1, 4)))
    return frames, truth


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

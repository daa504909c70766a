"""Pictures for the GPU benchmark: real face photos composited into 1080p frames.

:func:`load_photos` reads a folder of photos (or, where the packages are installed, the
photos that ship inside scikit-image and insightface). :func:`find_faces` runs the torch
BlazeFace on tiles of each photo. :func:`build_scene` cuts square regions around faces and
scales them into cells of a smooth synthetic background (:data:`BACKGROUNDS`).
:func:`write_clip` makes a short uncompressed video of the scene swaying a few pixels, which
``livecam run`` reads as a
``file:`` input (looped): a new frame every time, as from a camera, and decoding it is a
copy. (An ``image:`` input hands the same array again and again, and the GPU follower uploads
and searches an array it has already seen only once: runs 10-66 measured that, not a camera.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PHOTO_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


@dataclass(frozen=True)
class FaceInPhoto:
    photo: np.ndarray  # (h, w, 3) uint8 BGR
    box_xyxy: np.ndarray  # (4,) px
    keypoints_xy: np.ndarray  # (6, 2) px


@dataclass(frozen=True)
class Scene:
    """One frame (H, W, 3) uint8 BGR with ``n_faces`` faces at ``boxes_xyxy`` (F, 4) px."""

    n_faces: int
    frame_bgr: np.ndarray
    boxes_xyxy: np.ndarray


def load_photos(folder: Path | None) -> list[np.ndarray]:
    """BGR uint8 photos from ``folder``, or from installed packages when it is None."""
    import cv2

    photos: list[np.ndarray] = []
    if folder is not None:
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() in PHOTO_SUFFIXES:
                image = cv2.imread(str(path), cv2.IMREAD_COLOR)
                if image is not None and min(image.shape[:2]) >= 96:
                    photos.append(image)
        if not photos:
            raise SystemExit(f"no usable photos (.png/.jpg, >= 96 px) in {folder}")
        return photos
    try:
        import skimage.data

        photos.append(np.ascontiguousarray(skimage.data.astronaut()[:, :, ::-1]))
    except ImportError:
        pass
    try:
        from insightface.data import get_image

        photos.append(get_image("t1"))
    except Exception:  # insightface missing or its data not readable: skimage suffices
        pass
    if not photos:
        raise SystemExit("no photos: pass --photos DIR (scikit-image/insightface not installed)")
    return photos


def find_faces(detector: Any, photos: list[np.ndarray], device: Any,
               tile_px: int = 384) -> list[FaceInPhoto]:
    """Faces in each photo: the whole photo plus overlapping tiles, duplicates dropped."""
    import torch

    found: list[FaceInPhoto] = []
    for photo in photos:
        h, w = photo.shape[:2]
        views = [(0, 0, w, h)]
        step = tile_px // 2
        if max(h, w) > tile_px * 1.5:
            views += [(x, y, min(x + tile_px, w), min(y + tile_px, h))
                      for y in range(0, max(h - step, 1), step)
                      for x in range(0, max(w - step, 1), step)]
        cands: list[tuple[float, np.ndarray, np.ndarray]] = []
        for x1, y1, x2, y2 in views:
            view = np.ascontiguousarray(photo[y1:y2, x1:x2])
            with torch.inference_mode():
                det = detector(torch.from_numpy(view).to(device)[None])
            valid = det.valid[0].cpu().numpy()
            boxes = det.boxes_xyxy_px[0].float().cpu().numpy()
            kps = det.keypoints_xy_px[0].float().cpu().numpy()
            scores = det.scores[0].float().cpu().numpy()
            for j in np.flatnonzero(valid):
                off = np.array([x1, y1], np.float32)
                cands.append((float(scores[j]), boxes[j] + np.tile(off, 2), kps[j] + off))
        cands.sort(key=lambda c: -c[0])
        kept: list[tuple[float, np.ndarray, np.ndarray]] = []
        for cand in cands:
            if all(_iou(cand[1], k[1]) < 0.3 for k in kept):
                kept.append(cand)
        found += [FaceInPhoto(photo, box, kp) for _, box, kp in kept
                  if box[2] - box[0] >= 24]
    found.sort(key=lambda f: -(f.box_xyxy[2] - f.box_xyxy[0]))
    return found


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


#: The scene's background: ``wall``, a shaded wall (the blobs below at 15 % of their colour);
#: ``blobs``, large soft patches of strong colour (the benchmarks' default, the scene of the
#: figures measured before ``wall``).
#: On ``blobs`` the face follower's edge search takes weak detector hits at the frame's edges
#: for cut faces and covers them where no face is (``python -m scripts.scene_covers``: 57 of
#: 60 frames of the 1-face scene; ``wall`` none): a many-streams figure on it measures those
#: covers as much as the streams. Every 3rd of 30 frames: ``wall`` no stray cover on seeds 0-5;
#: ``blobs`` at 40 % of their colour on 13 of 40 frames of seeds 0-3.
BACKGROUNDS = ("wall", "blobs")
WALL_COLOUR = 0.15


def _background(height: int, width: int, seed: int, kind: str = "blobs") -> np.ndarray:
    import cv2

    if kind not in BACKGROUNDS:
        raise ValueError(f"background {kind!r}: one of {', '.join(BACKGROUNDS)}")
    rng = np.random.default_rng(seed)
    small = rng.integers(40, 200, (9, 16, 3)).astype(np.uint8)
    image = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC).astype(np.float32)
    if kind == "wall":
        grey = image.mean(axis=2, keepdims=True)
        image = grey + np.float32(WALL_COLOUR) * (image - grey)
    noise = rng.integers(-6, 7, image.shape)
    return np.clip(np.round(image) + noise, 0, 255).astype(np.uint8)


def _cells(n_faces: int, height: int, width: int) -> list[tuple[int, int, int]]:
    """(x, y, side) squares where faces go."""
    if n_faces == 1:
        side = int(height * 0.8)
        return [((width - side) // 2, (height - side) // 2, side)]
    cols = int(np.ceil(np.sqrt(n_faces)))
    rows = int(np.ceil(n_faces / cols))
    side = int(min(height / rows, width / cols) * 0.96)
    gap_x = (width - cols * side) // (cols + 1)
    gap_y = (height - rows * side) // (rows + 1)
    return [(gap_x + c * (side + gap_x), gap_y + r * (side + gap_y), side)
            for r in range(rows) for c in range(cols)][:n_faces]


def build_scene(faces: list[FaceInPhoto], n_faces: int, height: int, width: int, *,
                seed: int = 0, background: str = "blobs") -> Scene:
    """A frame with ``n_faces`` faces (photos reused round-robin) in a grid of cells, on
    ``background`` (:data:`BACKGROUNDS`)."""
    import cv2

    if not faces:
        raise SystemExit("no face found in the photos: give photos with a visible face")
    base = _background(height, width, seed, background)
    boxes = []
    for i, (x, y, side) in enumerate(_cells(n_faces, height, width)):
        face = faces[i % len(faces)]
        bx1, by1, bx2, by2 = face.box_xyxy
        centre = np.array([(bx1 + bx2) / 2, (by1 + by2) / 2])
        region = 2.4 * max(bx2 - bx1, by2 - by1)
        scale = side / region
        # photo px -> frame px: a similarity putting the region into the cell
        m = np.array([[scale, 0, x + side / 2 - scale * centre[0]],
                      [0, scale, y + side / 2 - scale * centre[1]]], np.float64)
        cell = cv2.warpAffine(face.photo, m, (width, height), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REFLECT)
        base[y:y + side, x:x + side] = cell[y:y + side, x:x + side]
        boxes.append((face.box_xyxy.reshape(2, 2) * scale + m[:, 2]).reshape(4))
    return Scene(n_faces, base, np.asarray(boxes, np.float32))


#: frames in a clip and the sway of the scene in it (px, a circle)
CLIP_FRAMES = 30
CLIP_SWAY_PX = 3.0


def write_clip(frame_bgr: np.ndarray, path: Path, *, fps: float = 30.0,
               frames: int = CLIP_FRAMES) -> Path:
    """``frame_bgr`` moving on a circle of ``CLIP_SWAY_PX`` (sub-pixel, reflected borders),
    ``frames`` frames of raw BGR video (FFmpeg's rawvideo in NUT: decoding is a copy, so the
    clip costs the capture thread what a camera's new buffer would)."""
    import av
    import cv2

    height, width = frame_bgr.shape[:2]
    with av.open(str(path), "w", format="nut") as container:
        stream = container.add_stream("rawvideo", rate=round(fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "bgr24"
        for k in range(frames):
            angle = 2 * np.pi * k / frames
            shift = np.float32([[1, 0, CLIP_SWAY_PX * np.cos(angle)],
                                [0, 1, CLIP_SWAY_PX * np.sin(angle)]])
            moved = cv2.warpAffine(frame_bgr, shift, (width, height), flags=cv2.INTER_LINEAR,
                                   borderMode=cv2.BORDER_REFLECT)
            for packet in stream.encode(av.VideoFrame.from_ndarray(moved, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path

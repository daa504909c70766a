"""The faces and backdrop ``livecam demo`` builds its clip from: every face of a photo cut out
with a soft edge (:func:`face_sprites`) and a face-free backdrop (:func:`background`). The
tests' clip maker draws the same sprites along trajectories with exact ground truth."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from livecam.core.types import ImageBGR

__all__ = ["FaceSprite", "background", "face_sprites"]


@dataclass(frozen=True)
class FaceSprite:
    """A face cut from a photo: ``image_bgr`` (h, w, 3) uint8, ``alpha`` (h, w) float32 in
    [0, 1], ``face_box_xyxy`` (4,) float32 px inside the sprite (the landmark box)."""

    image_bgr: ImageBGR
    alpha: np.ndarray
    face_box_xyxy: np.ndarray



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

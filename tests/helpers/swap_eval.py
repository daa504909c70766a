"""Evaluate the classic swap on real faces from installed packages (tests and scripts).

:func:`real_faces` finds the 8 distinct real faces that ship offline (skimage's astronaut,
the six people of insightface's ``t1.jpg``, insightface's Tom Hanks crop). :func:`judge_pairs`
swaps every ordered pair (source onto target, in the target's own photo) and asks the dlib
judge whether the result is closer to the source than to the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from livecam.config.identity import IdentityConfig
from livecam.config.swap import SwapConfig
from livecam.identity.face_judge import FaceJudge, distance, dlib_box_from_mesh
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import MeshTopology
from livecam.swap.source import SourceFace

if TYPE_CHECKING:
    from livecam.config import Config
    from livecam.core.types import Packet, RuntimeState
    from livecam.identity import IdentityCollection

ImageBGR = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class RealFace:
    label: str
    image_bgr: ImageBGR  # the whole photo the face is in
    landmarks_xy: npt.NDArray[np.float32]  # (468, 2) px in image_bgr
    landmarks_z: npt.NDArray[np.float32]


def real_photos() -> dict[str, ImageBGR]:
    """The offline photos: astronaut (512x512), t1 (1280x886, six people), Tom Hanks (112x112)."""
    import insightface.data
    from skimage import data

    return {
        "astronaut": np.ascontiguousarray(data.astronaut()[:, :, ::-1]),
        "t1": insightface.data.get_image("t1"),
        "hanks": insightface.data.get_image("Tom_Hanks_54745"),
    }


def real_faces() -> list[RealFace]:
    """8 distinct real people, each with its face mesh (runs analysis, ~1 s)."""
    from livecam.analysis.photo import analyze_photo

    out = []
    for name, image in real_photos().items():
        faces = analyze_photo(image)
        order = np.argsort(faces.boxes_xyxy[:, 0]) if len(faces) > 1 else np.arange(len(faces))
        for k, i in enumerate(order):
            label = name if len(faces) == 1 else f"{name}-{k}"
            out.append(RealFace(label, image, faces.landmarks_xy[i, :468].copy(),
                                faces.landmarks_z[i, :468].copy()))
    return out


def source_from(face: RealFace, topology: MeshTopology,
                config: IdentityConfig | None = None, *,
                mirror_fill: bool = False, skin_only: bool = False,
                remove_accessories: bool = True, close_mouth: bool = True) -> SourceFace:
    """The face as a swap source, prepared exactly as the identity library prepares photos
    (except that no photo is refused for its head turn: the judge measures all 8 faces, also
    t1-4, turned 34°, which ``identity add`` refuses)."""
    from livecam.identity.photo import prepare_face

    prep = prepare_face(face.image_bgr, face.label.encode(), face.landmarks_xy,
                        face.landmarks_z, config or IdentityConfig(max_turn_deg=90.0),
                        label=face.label)
    return SourceFace.build(photo_sha256=prep.sha256, texture_bgr=prep.texture_bgr,
                            landmarks_xy=prep.landmarks_xy, landmarks_z=prep.landmarks_z,
                            topology=topology, mirror_fill=mirror_fill, skin_only=skin_only,
                            remove_accessories=remove_accessories, close_mouth=close_mouth)


def one_identity(face: RealFace, name: str) -> IdentityCollection:
    """A library of one identity, ``name``, made from ``face`` as ``identity add`` prepares a
    photo (default :class:`IdentityConfig`)."""
    from livecam.identity import Identity, IdentityCollection, IdentityPhoto
    from livecam.identity.photo import prepare_face

    prep = prepare_face(face.image_bgr, face.label.encode(), face.landmarks_xy,
                        face.landmarks_z, IdentityConfig())
    return IdentityCollection({name: Identity(name, (IdentityPhoto(
        prep.sha256, prep.texture_bgr, prep.landmarks_xy, prep.landmarks_z),))})


def analysed(frames: Sequence[ImageBGR], state: RuntimeState,
             config: Config | None = None) -> list[Packet]:
    """``frames`` (at 30 fps) through the real analysis stages of ``config`` (default: the
    defaults; detector, mesh, tracker, smoothing), opened and closed here: the packets the swap
    stage is given in ``livecam run``."""
    from livecam.analysis import build_stages
    from livecam.config import load_config
    from livecam.core.types import Frame, Packet

    packets = []
    config = config or load_config(None)
    stages = build_stages(config.analysis, fps=config.capture.fps)
    for stage in stages:
        stage.open()
    try:
        for i, image in enumerate(frames):
            packet = Packet.from_frame(Frame(i, i * 33_333_333, image), state)
            for stage in stages:
                packet = stage.process(packet)
            packets.append(packet)
    finally:
        for stage in stages:
            stage.close()
    return packets


@dataclass(frozen=True)
class PairResult:
    source: str
    target: str
    d_source: float  # judge distance, swapped face -> source person
    d_target: float  # judge distance, swapped face -> target person
    fade: float

    @property
    def closer_to_source(self) -> bool:
        return self.d_source < self.d_target


def swap_pair(swapper: ClassicFaceSwapper, source: SourceFace, target: RealFace) -> ImageBGR:
    out = target.image_bgr.copy()
    swapper.swap_into(out, target.image_bgr, source, target.landmarks_xy, target.landmarks_z)
    return out


def judge_pairs(config: SwapConfig, faces: list[RealFace], topology: MeshTopology,
                judge: FaceJudge) -> list[PairResult]:
    """Every ordered pair (source != target); the swap only touches the target face."""
    swapper = ClassicFaceSwapper(config, topology)
    sources = [source_from(f, topology, mirror_fill=config.mirror_fill,
                           skin_only=config.source_skin_only,
                           remove_accessories=config.remove_source_accessories,
                           close_mouth=config.keep_mouth) for f in faces]
    ref = [judge.embed(f.image_bgr, dlib_box_from_mesh(f.landmarks_xy)) for f in faces]
    results = []
    for j, target in enumerate(faces):
        box = dlib_box_from_mesh(target.landmarks_xy)
        for i, source in enumerate(sources):
            if i == j:
                continue
            out = target.image_bgr.copy()
            info = swapper.swap_into(out, target.image_bgr, source, target.landmarks_xy,
                                     target.landmarks_z)
            emb = judge.embed(out, box)
            results.append(PairResult(faces[i].label, target.label, distance(emb, ref[i]),
                                      distance(emb, ref[j]), info.fade))
    return results


def summarise(results: list[PairResult]) -> dict[str, float]:
    return {
        "pairs": float(len(results)),
        "closer_to_source": float(np.mean([r.closer_to_source for r in results])),
        "mean_d_source": float(np.mean([r.d_source for r in results])),
        "mean_d_target": float(np.mean([r.d_target for r in results])),
    }


# --- measures of a pasted look (tests/swap/test_look.py, scripts/judge_swap.py) ---------------


def changed_region(before_bgr: ImageBGR, after_bgr: ImageBGR) -> npt.NDArray[np.bool_]:
    """(H, W) bool: where the swap changed the picture."""
    return np.asarray((before_bgr != after_bgr).any(axis=2))


def _lightness(image_bgr: ImageBGR) -> npt.NDArray[np.float32]:
    import cv2

    return np.asarray(cv2.cvtColor(image_bgr, cv2.COLOR_BGR2LAB)[:, :, 0], np.float32)


def upper_edge_step(before_bgr: ImageBGR, after_bgr: ImageBGR, landmarks_xy: np.ndarray,
                    *, depth_fraction: float = 0.06) -> float:
    """Mean |lightness step| (8-bit Lab L) the swap adds across its region's upper edge.

    Columns between the inner ends of the brows (skin, no brow: the brows themselves differ
    between people); in each, the top of the changed region is the edge; the band just below
    it (``depth_fraction`` of the face width, after the soft edge) is compared with the live
    picture at the same place. A swapped face that meets the live forehead with the live
    face's own brightness scores ~0; a pale or dark band scores its step. (Above the edge the
    picture is the live one by construction.)
    """
    from livecam.analysis import geometry

    changed = changed_region(before_bgr, after_bgr)
    width = geometry.face_width_px(landmarks_xy)
    depth = max(2, int(width * depth_fraction))
    skip = max(2, int(width * 0.04))  # the soft edge itself
    l_before, l_after = _lightness(before_bgr), _lightness(after_bgr)
    x1, x2 = sorted((int(landmarks_xy[107, 0]), int(landmarks_xy[336, 0])))
    steps = []
    for x in range(x1, x2 + 1):
        rows = np.flatnonzero(changed[:, x])
        if len(rows) == 0:
            continue
        top = int(rows[0])
        band = slice(top + skip, top + skip + depth)
        steps.append(float(np.mean(l_after[band, x]) - np.mean(l_before[band, x])))
    return float(np.mean(np.abs(steps))) if steps else 0.0


def fine_detail_ratio(image_bgr: ImageBGR, region: npt.NDArray[np.bool_], *,
                      ring_px: int) -> float:
    """Fine-detail energy inside ``region`` over that in a ``ring_px`` ring just outside it
    (``livecam.swap.sharpness.detail_energy``): how crisp a face is against its surroundings."""
    import cv2

    from livecam.swap.sharpness import detail_energy

    inner = cv2.erode(region.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    grown = cv2.dilate(region.astype(np.uint8), np.ones((2 * ring_px + 1,) * 2, np.uint8)) > 0
    ring = grown & ~region
    return detail_energy(image_bgr, inner) / max(detail_energy(image_bgr, ring), 1e-3)


def enlarged(face: RealFace, face_px: float = 240.0) -> RealFace:
    """``face`` cut from its photo (a square of twice its mesh box) and enlarged so it is about
    ``face_px`` wide, as the demo shows faces, with its mesh found again on the result."""
    import cv2

    from livecam.analysis.photo import analyze_photo

    lo, hi = face.landmarks_xy.min(axis=0), face.landmarks_xy.max(axis=0)
    centre, side = (lo + hi) / 2, float(max(hi - lo)) * 2.0
    scale = face_px / float(hi[0] - lo[0])
    size = round(side * scale)
    m = np.array([[scale, 0, size / 2 - centre[0] * scale],
                  [0, scale, size / 2 - centre[1] * scale]], np.float32)
    image = np.asarray(cv2.warpAffine(face.image_bgr, m, (size, size), flags=cv2.INTER_CUBIC,
                                      borderMode=cv2.BORDER_REPLICATE), np.uint8)
    found = analyze_photo(image)
    if len(found) == 0:
        raise RuntimeError(f"{face.label}: no face found after enlarging")
    return RealFace(f"{face.label}@{int(face_px)}", image, found.landmarks_xy[0, :468].copy(),
                    found.landmarks_z[0, :468].copy())

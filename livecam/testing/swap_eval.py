"""Evaluate the classic swap on real faces from installed packages (tests and scripts).

:func:`real_faces` finds the 8 distinct real faces that ship offline (skimage's astronaut,
the six people of insightface's ``t1.jpg``, insightface's Tom Hanks crop). :func:`judge_pairs`
swaps every ordered pair (source onto target, in the target's own photo) and asks the dlib
judge whether the result is closer to the source than to the target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from livecam.config.identity import IdentityConfig
from livecam.config.swap import SwapConfig
from livecam.swap.classic import ClassicFaceSwapper
from livecam.swap.mesh import MeshTopology
from livecam.swap.source import SourceFace
from livecam.testing.face_judge import FaceJudge, distance, dlib_box_from_mesh

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
                mirror_fill: bool = False) -> SourceFace:
    """The face as a swap source, prepared exactly as the identity library prepares photos."""
    from livecam.identity.photo import prepare_face

    prep = prepare_face(face.image_bgr, face.label.encode(), face.landmarks_xy,
                        face.landmarks_z, config or IdentityConfig(), label=face.label)
    return SourceFace.build(photo_sha256=prep.sha256, texture_bgr=prep.texture_bgr,
                            landmarks_xy=prep.landmarks_xy, landmarks_z=prep.landmarks_z,
                            topology=topology, mirror_fill=mirror_fill)


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
    sources = [source_from(f, topology, mirror_fill=config.mirror_fill) for f in faces]
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

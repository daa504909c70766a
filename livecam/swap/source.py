""":class:`SourceFace`: one photo of an identity, prepared for the classic swap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from livecam.swap import geometry
from livecam.swap.mesh import MeshTopology
from livecam.swap.warp import SourceMesh

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class SourceFace:
    """A source face: texture + mesh + what the swap needs to know about the photo.

    ``landmarks_z`` is (468,) float32; ``eyes_open`` is (right, left) lid gap / eye width.
    Immutable; safe to share between threads.
    """

    photo_sha256: str
    mesh: SourceMesh
    landmarks_z: FloatArray
    pose: geometry.HeadPose
    eyes_open: tuple[float, float]

    @classmethod
    def build(cls, *, photo_sha256: str, texture_bgr: ImageBGR, landmarks_xy: FloatArray,
              landmarks_z: FloatArray, topology: MeshTopology,
              mirror_fill: bool = False) -> SourceFace:
        """Precompute everything per photo (called at identity load, not per frame).

        With ``mirror_fill`` a turned photo's hidden side is filled from its mirror image
        (:func:`livecam.swap.frontalize.frontalize`), which also makes its pose near frontal.
        """
        xy = np.ascontiguousarray(landmarks_xy[:468], np.float32)
        z = np.ascontiguousarray(landmarks_z[:468], np.float32)
        if mirror_fill:
            from livecam.swap.frontalize import frontalize

            texture_bgr, xy, z, _ = frontalize(texture_bgr, xy, z, topology)
        return cls(
            photo_sha256=photo_sha256,
            mesh=SourceMesh.build(np.ascontiguousarray(texture_bgr), xy, topology),
            landmarks_z=z,
            pose=geometry.head_pose(xy, z),
            eyes_open=geometry.eye_openness(xy),
        )


def nearest_pose(faces: tuple[SourceFace, ...], pose: geometry.HeadPose) -> SourceFace:
    """The photo whose head pose is nearest ``pose`` (yaw/pitch distance)."""
    if not faces:
        raise ValueError("an identity needs at least one source face")
    return min(faces, key=lambda f: f.pose.distance_deg(pose))

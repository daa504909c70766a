"""The classic swap stage: every selected face gets its identity's face, warped and blended.

Which identity a face gets is decided per frame from ``packet.state`` (so hotkeys and control
commands switch it without a restart): a runtime per-track assignment first, then
``swap.assign`` (people in order of appearance), then the active identity. ``bypass``, or no
identity chosen at all, sends the frame through untouched (both are the user's choice).

Fail closed (``livecam.swap.cover``): the faces analysis withheld (``packet.withheld``) and the
faces this stage cannot swap (turned past ``fade_end_deg``, identity still loading or missing,
the warp failed) are covered as ``advanced.swap.unswappable`` says, never shown as they are unless
that is ``real``. A turning face fades from its swap into that cover. An identity that cannot be
loaded (removed, cache damaged) is not fatal: its faces are covered and a log line says why, at
most once per ``advanced.swap.missing_log_interval_s``; the load is retried after that interval. An
identity being prepared on the preload thread is not waited for (its faces are covered), except
on its first use when nothing started preparing it yet.

Only the pipeline thread calls :meth:`ClassicSwapStage.process`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from livecam.analysis import geometry
from livecam.config.swap import SwapConfig
from livecam.core.stage import StageBase
from livecam.core.types import Packet, Unswappable, WithheldFaces
from livecam.identity.model import Identity, IdentitySource
from livecam.swap.assign import IdentityAssigner
from livecam.swap.classic import AccessoryMemory, ClassicFaceSwapper, FaceSwapInfo
from livecam.swap.colour import ColourMemory
from livecam.swap.cover import FaceCover
from livecam.swap.mesh import MeshTopology
from livecam.swap.prepared import PreparedIdentities
from livecam.swap.shape import NeutralShape, as_xyz
from livecam.swap.source import SourceFace, nearest_pose

log = logging.getLogger(__name__)


def source_faces(identity: Identity, topology: MeshTopology,
                 mirror_fill: bool = False, skin_only: bool = False,
                 remove_accessories: bool = False,
                 close_mouth: bool = False) -> tuple[SourceFace, ...]:
    """Precompute the swap's per-photo data for every photo of ``identity``."""
    return tuple(
        SourceFace.build(photo_sha256=p.sha256, texture_bgr=p.texture_bgr,
                         landmarks_xy=p.landmarks_xy, landmarks_z=p.landmarks_z,
                         topology=topology, mirror_fill=mirror_fill, skin_only=skin_only,
                         remove_accessories=remove_accessories, close_mouth=close_mouth)
        for p in identity.photos
    )


@dataclass(slots=True)
class _TrackState:
    """What the stage keeps of one tracked face between frames: made on the face's first
    swap, dropped in the first frame the track is gone from (pipeline thread only)."""

    neutral: NeutralShape = field(default_factory=NeutralShape)  # for the shape transfer
    colour: ColourMemory = field(default_factory=ColourMemory)
    accessory: AccessoryMemory = field(default_factory=AccessoryMemory)


class ClassicSwapStage(StageBase):
    """Swaps the faces of each packet (needs ``faces.landmarks_xy`` from the analysis stages).

    ``identities`` loads an identity by name (an :class:`~livecam.identity.IdentityLibrary` or
    :class:`~livecam.identity.IdentityCollection`). ``clock`` returns seconds (injectable so
    tests can check the rate limit without sleeping).
    """

    name = "swap"

    def __init__(self, config: SwapConfig, identities: IdentitySource, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.identities = identities
        self._clock = clock
        self._swapper: ClassicFaceSwapper | None = None
        # each identity's photos prepared on a worker thread, so a switch does not stall frames
        self._prepared: PreparedIdentities[tuple[SourceFace, ...]] = PreparedIdentities(
            self._prepare, retry_s=config.missing_log_interval_s, clock=clock)
        self._last_log: dict[str, float] = {}
        self._assigner = IdentityAssigner(config.assign)
        # track id -> its state, for the tracked faces seen in the last frame
        self._tracks: dict[int, _TrackState] = {}
        self.cover = FaceCover.from_config(config)
        self.last_infos: tuple[FaceSwapInfo, ...] = ()
        #: the faces covered in the latest frame (withheld by analysis or by this stage)
        self.last_withheld = WithheldFaces()

    def open(self) -> None:
        if self._swapper is None:
            from livecam.swap.mesh import build_topology

            self._swapper = ClassicFaceSwapper(self.config, build_topology())

    def close(self) -> None:
        self._prepared.close()
        self._swapper = None

    def _prepare(self, name: str) -> tuple[SourceFace, ...]:
        """``name``'s photos ready to warp (on the identity worker thread)."""
        swapper = self._swapper
        if swapper is None:
            raise RuntimeError("the swap stage closed while an identity was prepared")
        faces = source_faces(self.identities.load(name), swapper.topology,
                             self.config.mirror_fill, self.config.source_skin_only,
                             self.config.remove_source_accessories, self.config.keep_mouth)
        log.info("identity %s loaded (%d photo(s))", name, len(faces))
        return faces

    def _warn(self, key: str, message: str) -> None:
        now = self._clock()
        last = self._last_log.get(key)
        if last is None or now - last >= self.config.missing_log_interval_s:
            self._last_log[key] = now
            log.warning("%s", message)

    def _faces_of(self, name: str) -> tuple[SourceFace, ...] | Unswappable:
        """The prepared photos of ``name``, or why there are none this frame."""
        got = self._prepared.get(name)
        if got is Unswappable.IDENTITY_MISSING:
            shown = "shown real" if self.cover.shows_real_faces else "covered"
            self._warn(f"missing:{name}", f"identity {name!r} is unavailable, its faces are "
                       f"{shown}: {self._prepared.why(name)}")
        return got

    def _track_state(self, track_id: int) -> _TrackState | None:
        """The tracked face's state, made on its first use (None: untracked face)."""
        if track_id < 0:
            return None
        state = self._tracks.get(track_id)
        if state is None:
            state = self._tracks[track_id] = _TrackState()
        return state

    def _forget_gone(self, *track_ids: np.ndarray) -> None:
        """Drop the state of every track not among ``track_ids`` (ended tracks)."""
        present = {int(t) for ids in track_ids for t in ids}
        for gone in [t for t in self._tracks if t not in present]:
            del self._tracks[gone]

    def process(self, packet: Packet) -> Packet:
        if self._swapper is None:
            raise RuntimeError("ClassicSwapStage.process called before open()")
        faces = packet.faces
        self.last_infos = ()
        self.last_withheld = packet.withheld
        if packet.state.bypass:
            self._prepared.ahead(self._assigner.wanted(packet.state))
            return packet
        if len(faces) and not faces.has_landmarks:
            self._warn("no-landmarks", "faces arrive without a face mesh; the classic swap "
                       "needs the analysis stages' landmarks (they are covered)")
            faces_withheld = WithheldFaces.from_faces(faces, Unswappable.NO_SWAP)
            self.last_withheld = WithheldFaces.concat([self._chosen(packet), faces_withheld])
            return self._covered(packet, self.last_withheld)
        target = packet.image_bgr
        index = packet.frame.index
        has_z = faces.landmarks_z.ndim == 2 and faces.landmarks_z.shape[0] == len(faces)
        # Plan every face first: the cover goes under faces that fade, so it is drawn first.
        plan: list[tuple[int, SourceFace, float]] = []
        withheld: list[tuple[int, Unswappable]] = []
        for i in range(len(faces)):
            name = self._assigner.identity_for(packet.state, int(faces.track_ids[i]))
            if name is None:
                continue  # no identity chosen: the user's choice, like bypass
            choices = self._faces_of(name)
            if isinstance(choices, Unswappable):
                withheld.append((i, choices))
                continue
            xy = faces.landmarks_xy[i]
            z = faces.landmarks_z[i] if has_z else np.zeros(len(xy), np.float32)
            pose = geometry.head_pose(xy[:468], z[:468])
            source = choices[0] if len(choices) == 1 else nearest_pose(choices, pose)
            fade = self._swapper.fade_for(source, pose)
            if fade < 1.0:
                withheld.append((i, Unswappable.TURNED))
            plan.append((i, source, fade))
        self._prepared.ahead(self._assigner.wanted(packet.state))
        under = WithheldFaces.concat([self._chosen(packet), *(
            WithheldFaces.from_faces(faces[[i]], reason) for i, reason in withheld)])
        covering = len(under) > 0 and not self.cover.shows_real_faces
        if not plan and not covering:
            self._forget_gone(faces.track_ids, under.track_ids)
            self.last_withheld = under
            return packet
        out = target.copy()  # stages never write into their input
        if covering:
            self.cover.cover_into(out, under, index,
                                  identities=self._names(packet, under.track_ids))
        infos = []
        failed = []
        for i, source, fade in plan:
            xy = faces.landmarks_xy[i]
            z = faces.landmarks_z[i] if has_z else np.zeros(len(xy), np.float32)
            state = self._track_state(int(faces.track_ids[i]))
            neutral = (state.neutral.update(as_xyz(xy, z))
                       if state is not None and self.config.shape_transfer > 0.0 else None)
            colour = (state.colour
                      if state is not None and self.config.colour_smoothing > 0.0 else None)
            accessory = state.accessory if state is not None else None
            info = self._swapper.swap_into(out, target, source, xy, z, neutral_xyz=neutral,
                                           colour_memory=colour, accessory_memory=accessory)
            infos.append(info)
            if not info.swapped and fade > 0.0:
                failed.append(i)
        if failed:  # the warp could not be drawn (off the frame, degenerate): cover it now
            lost = WithheldFaces.from_faces(faces[failed], Unswappable.NO_SWAP)
            self.cover.cover_into(out, lost, index,
                                  identities=self._names(packet, lost.track_ids))
            under = WithheldFaces.concat([under, lost])
        full = [i for (i, _, fade), info in zip(plan, infos, strict=True)
                if info.swapped and fade >= 1.0]
        self.cover.remember(out, faces[full], index,
                            identities=self._names(packet, faces.track_ids[full]))
        self._forget_gone(faces.track_ids, under.track_ids)
        self.last_infos = tuple(infos)
        self.last_withheld = under
        return packet.with_fields(image_bgr=out)

    def _chosen(self, packet: Packet) -> WithheldFaces:
        """The faces analysis withheld, less those no identity is chosen for (shown as they
        are, like every face when no identity is active)."""
        withheld = packet.withheld
        keep = np.array([self._assigner.identity_for(packet.state, int(t)) is not None
                         for t in withheld.track_ids], bool)
        return withheld if keep.all() else withheld[keep]

    def _names(self, packet: Packet, track_ids: np.ndarray) -> list[str | None]:
        """The identity each of ``track_ids`` has under ``packet.state``: a face's held swap
        stands in for it only while it keeps that identity."""
        return [self._assigner.identity_for(packet.state, int(t)) for t in track_ids]

    def _covered(self, packet: Packet, withheld: WithheldFaces) -> Packet:
        return packet.with_fields(image_bgr=self.cover.cover(
            packet.image_bgr, withheld, packet.frame.index,
            identities=self._names(packet, withheld.track_ids)))

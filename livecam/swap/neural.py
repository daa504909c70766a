"""The neural swap stage: each tracked face swapped with its identity's ArcFace embedding by
an inswapper-family model (:class:`~livecam.swap.inswapper.InswapperModel`), the faces it
cannot swap covered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from livecam.core.errors import EngineUnavailableError, IdentityError
from livecam.core.stage import StageBase
from livecam.core.types import Packet, RuntimeState, Unswappable, WithheldFaces
from livecam.swap import features
from livecam.swap.arcface import EmbeddingFn, embedding_of
from livecam.swap.assign import IdentityAssigner
from livecam.swap.cover import FaceCover
from livecam.swap.enhance import FaceEnhancer
from livecam.swap.inswapper import InswapperModel
from livecam.swap.neural_models import NeuralModels
from livecam.swap.prepared import PreparedIdentities

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class SwapPlan:
    """What :meth:`NeuralSwapStage.plan` decided for one packet, before the model runs.

    ``under``: the faces to cover; ``wanted``: every face an identity is chosen for (indices
    into ``packet.faces``; all covered when the engine does not answer); ``picked``: the faces
    to swap, with their ArcFace keypoints (N, 5, 2) px, latents (N, 512) float32, kept regions
    and soft edges (see :meth:`InswapperModel.swap`); ``down``: a remote engine was already
    down while planning (the recognizer); ``names``: the identity of each of
    ``packet.faces`` and ``under_names`` of each face in ``under`` (None: none chosen), so a
    face's held swap stands in for it only while it keeps that identity.
    """

    packet: Packet
    under: WithheldFaces
    wanted: list[int]
    picked: list[int] = field(default_factory=list)
    kps_xy: np.ndarray | None = None
    latents: np.ndarray | None = None
    keep_loops_xy: list[list[np.ndarray]] = field(default_factory=list)
    keep_soft_px: list[float] = field(default_factory=list)
    ovals_xy: list[np.ndarray] = field(default_factory=list)
    down: bool = False
    names: list[str | None] = field(default_factory=list)
    under_names: list[str | None] = field(default_factory=list)


class NeuralSwapStage(StageBase):
    """``swap.mode: neural``: swaps each tracked face with its identity's embedding.

    Which identity a face gets: :class:`~livecam.swap.assign.IdentityAssigner` (runtime
    per-track choice, then ``assign`` by order of appearance, then the active identity).
    ``source_embedding(name)`` returns the (512,) ArcFace embedding of an identity (see
    :class:`livecam.swap.arcface.IdentityEmbeddings`), or None (or raises
    :class:`IdentityError`) when it cannot be had: that face is covered, logged, and the
    identity tried again after ``missing_log_interval_s``. It runs once per identity, on a
    worker thread (:class:`~livecam.swap.prepared.PreparedIdentities`): those in use and
    those in ``state.identities`` are embedded ahead, and a face whose identity is still being
    embedded is covered rather than waited for. Faces analysis withheld (``packet.withheld``)
    are covered too, and every face of a frame the (remote) engine did not answer for, by
    ``cover`` (:class:`~livecam.swap.cover.FaceCover`, default: hold then blur).
    ``require_models()`` (called first in ``open``) raises :class:`ModelError` naming
    ``livecam models fetch`` when a model file is missing. ``keep_eyes`` / ``keep_mouth``: the
    streamer's own eyes (inside the lids) and mouth interior stay in the picture, so gaze,
    blinks and the mouth's opening are the streamer's whatever the generator makes of them
    (``mouth_size`` scales the kept mouth region). Off by default here (insightface's plain
    paste-back, which the GPU pipeline matches); ``build_neural_stage`` passes ``swap.*``.
    Only the pipeline thread calls ``process``; ``process`` is ``plan``, the model, ``finish``
    (:class:`~livecam.swap.neural_remote.RemoteSwapStage` runs the same steps with several
    frames in flight).
    """

    name = "swap"

    def __init__(self, model: InswapperModel, source_embedding: EmbeddingFn, *,
                 require_models: Callable[[], object] | None = None,
                 five_point: Callable[[np.ndarray], np.ndarray] | None = None,
                 assign: tuple[str, ...] = (), cover: FaceCover | None = None,
                 keep_eyes: bool = False, keep_mouth: bool = False,
                 mouth_size: float = 1.0, missing_log_interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.keep_eyes, self.keep_mouth, self.mouth_size = keep_eyes, keep_mouth, mouth_size
        self._assigner = IdentityAssigner(assign)
        self.source_embedding = source_embedding
        self._embeddings: PreparedIdentities[np.ndarray] = PreparedIdentities(
            self._embedding_of, retry_s=missing_log_interval_s, clock=clock)
        self.require_models = require_models
        self._five_point = five_point
        self.cover = cover or FaceCover()

    def open(self) -> None:
        if self.require_models is not None:
            self.require_models()
        if self._five_point is None:
            from livecam.analysis.landmarks import five_point

            self._five_point = five_point
        self.model.open()

    def close(self) -> None:
        self._embeddings.close()
        self.model.close()

    def _embedding_of(self, name: str) -> np.ndarray:
        """``name``'s embedding (on the identity worker thread); a missing one is logged."""
        try:
            return embedding_of(self.source_embedding, name)
        except IdentityError as exc:
            shown = "shown real" if self.cover.shows_real_faces else "covered"
            log.warning("identity %r is unavailable, its faces are %s: %s", name, shown, exc)
            raise

    def process(self, packet: Packet) -> Packet:
        plan = self.plan(packet)
        if isinstance(plan, Packet):
            return plan
        if plan.down or not plan.picked:
            return self.finish(plan)
        assert plan.kps_xy is not None and plan.latents is not None
        try:
            crops, matrices = self.model.align(packet.image_bgr, plan.kps_xy)
            faces = self.model.swap_crops(crops, plan.latents)
        except EngineUnavailableError:
            return self.finish_down(plan)
        return self.finish(plan, faces, matrices)

    def plan(self, packet: Packet) -> SwapPlan | Packet:
        """Which faces of ``packet`` are swapped (with what) and which covered; the packet
        itself when nothing is to be done (bypass, nothing chosen). Pipeline thread."""
        faces = packet.faces
        if packet.state.bypass:
            self._embeddings.ahead(self._assigner.wanted(packet.state))
            return packet
        assert self._five_point is not None, "process() before open()"
        state = packet.state
        withheld = packet.withheld
        # faces no identity is chosen for are shown as they are (the user's choice)
        keep = np.array([self._assigner.identity_for(state, int(t)) is not None
                         for t in withheld.track_ids], bool)
        under = withheld if keep.all() else withheld[keep]
        names = [self._assigner.identity_for(state, int(t)) for t in faces.track_ids]
        wanted = [i for i, name in enumerate(names) if name]
        picked: list[int] = []
        embeddings: list[np.ndarray] = []
        missing: dict[int, Unswappable] = {}
        try:
            for i, name in enumerate(names):
                if name is None:
                    continue
                got = self._embeddings.get(name) if faces.has_landmarks \
                    else Unswappable.NO_SWAP
                if isinstance(got, Unswappable):
                    missing[i] = got
                else:
                    picked.append(i)
                    embeddings.append(got)
        except EngineUnavailableError:  # a remote recognizer is down
            return SwapPlan(packet, under, wanted, down=True, names=names,
                            under_names=self._names(state, under))
        finally:
            self._embeddings.ahead(self._assigner.wanted(state))
        if missing:
            under = WithheldFaces.concat([under, WithheldFaces.from_faces(
                faces[list(missing)], list(missing.values()))])
        under_names = self._names(state, under)
        if not picked:
            if len(under) == 0 or self.cover.shows_real_faces:
                return packet
            return SwapPlan(packet, under, wanted, names=names, under_names=under_names)
        return SwapPlan(packet, under, wanted, picked, names=names, under_names=under_names,
                        kps_xy=self._five_point(faces.landmarks_xy[picked]),
                        latents=self.model.latents(np.stack(embeddings)),
                        keep_loops_xy=[self._kept_loops(faces.landmarks_xy[i]) for i in picked],
                        keep_soft_px=[features.KEPT_EDGE_FRACTION
                                      * float(np.ptp(faces.landmarks_xy[i][:, 0]))
                                      for i in picked],
                        ovals_xy=[faces.landmarks_xy[i][list(features.FACE_OVAL_LOOP)]
                                  for i in picked])

    def finish(self, plan: SwapPlan, faces_bgr: np.ndarray | None = None,
               matrices: np.ndarray | None = None) -> Packet:
        """``plan``'s packet with its faces covered and the swapped ``faces_bgr`` (N, S, S, 3)
        uint8, aligned with ``matrices`` (N, 2, 3), pasted (None when nothing was picked).
        Called in frame order by one thread (it keeps the cover's last good swaps)."""
        if plan.down:
            return self.finish_down(plan)
        packet, index = plan.packet, plan.packet.frame.index
        # a new image where anything is covered; paste_back never writes into its input
        out = self.cover.cover(packet.image_bgr, plan.under, index,
                               identities=plan.under_names)
        if plan.picked:
            assert faces_bgr is not None and matrices is not None and plan.kps_xy is not None
            out = self.model.paste(out, faces_bgr, matrices, plan.kps_xy,
                                   keep_loops_xy=plan.keep_loops_xy,
                                   keep_soft_px=plan.keep_soft_px,
                                   ovals_xy=plan.ovals_xy)
            self.cover.remember(out, packet.faces[plan.picked], index,
                                identities=[plan.names[i] for i in plan.picked])
        return packet.with_fields(image_bgr=out)

    def finish_down(self, plan: SwapPlan) -> Packet:
        """``plan``'s packet when a remote engine is down or late: every face meant to be
        swapped is covered, never sent as it is (the engine reconnects in the background)."""
        packet = plan.packet
        down = WithheldFaces.from_faces(packet.faces[plan.wanted], Unswappable.ENGINE_DOWN)
        return packet.with_fields(image_bgr=self.cover.cover(
            packet.image_bgr, WithheldFaces.concat([plan.under, down]), packet.frame.index,
            identities=[*plan.under_names, *(plan.names[i] for i in plan.wanted)]))

    def _names(self, state: RuntimeState, withheld: WithheldFaces) -> list[str | None]:
        """The identity each withheld face has under ``state``."""
        return [self._assigner.identity_for(state, int(t)) for t in withheld.track_ids]

    def _kept_loops(self, landmarks_xy: np.ndarray) -> list[np.ndarray]:
        """The streamer's regions to keep for one face's mesh (468+, 2)."""
        return features.kept_loops(landmarks_xy, eyes=self.keep_eyes, mouth=self.keep_mouth,
                                   mouth_size=self.mouth_size)

    def health(self) -> dict | None:
        """The swap engine's link state when it is remote (``TritonEngine.health``), else None.
        Any thread."""
        health = getattr(self.model.engine, "health", None)
        return health() if callable(health) else None


def build_neural_stage(models: NeuralModels, load_identity: Callable[[str], object], *,
                       assign: tuple[str, ...] = (), cover: FaceCover | None = None,
                       keep_eyes: bool = True, keep_mouth: bool = True,
                       mouth_size: float = 1.0, pixel_boost_px: int | None = None,
                       enhancer: FaceEnhancer | None = None,
                       missing_log_interval_s: float = 5.0) -> NeuralSwapStage:
    """The neural swap stage for ``models`` (cheap; see :class:`NeuralModels`).

    ``keep_eyes`` / ``keep_mouth`` / ``mouth_size``: see :class:`NeuralSwapStage` (from
    ``advanced.swap.keep_eyes == "always"``, ``swap.keep_mouth``, ``advanced.swap.mouth_size``).
    ``missing_log_interval_s`` (``advanced.swap.missing_log_interval_s``): how often an identity
    that cannot be had is logged and tried again. ``pixel_boost_px`` (``advanced.swap.pixel_boost``)
    and ``enhancer`` (``swap.enhancer``, see
    :func:`livecam.swap.enhance.build_face_enhancer`): see :class:`InswapperModel`.

    ``load_identity`` is the identity library's ``load``. The model files are checked in the
    stage's ``open()``: a missing or corrupt file raises :class:`ModelError` naming
    ``livecam models fetch <name>`` (or ``import``). The backend choice is logged here.
    """
    from livecam.analysis.landmarks import five_point

    swapper, recognizer, choice = models.swapper, models.recognizer, models.backend()
    log.info("neural swap: %s with %s on the %s engine (%s)", swapper.name, recognizer.name,
             choice.name, choice.reason)
    model = InswapperModel(models.lazy_generator(), models.swapper_path,
                           crop_size_px=swapper.crop_size_px or 128,
                           template=swapper.template or "arcface_128", mean=swapper.mean,
                           std=swapper.std, max_batch=models.engine.max_batch,
                           pixel_boost_px=pixel_boost_px, enhancer=enhancer)
    return NeuralSwapStage(model, models.embeddings(load_identity),
                           require_models=models.require, five_point=five_point, assign=assign,
                           cover=cover, keep_eyes=keep_eyes, keep_mouth=keep_mouth,
                           mouth_size=mouth_size, missing_log_interval_s=missing_log_interval_s)

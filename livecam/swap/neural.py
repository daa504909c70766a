"""The neural swap: inswapper-family models driven by ArcFace embeddings.

Pre- and post-processing follow insightface 2.1's ``INSwapper.get`` operation for operation
(same alignment, same float32 arithmetic, same paste-back), so given the same keypoints and
model our output matches the reference within one grey level (tests/swap/test_neural_parity.py).
The paste-back is insightface's own rather than the classic swap's ``blend.feather_mask``:
parity with the reference needs its exact erode/blur sizes. It is computed on the face's region
of interest only, which gives the same pixels as insightface's full-frame version (its mask is
zero outside the face) at a fraction of the cost for HD frames.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from livecam.core.errors import EngineUnavailableError
from livecam.core.stage import StageBase
from livecam.core.types import ImageBGR, Packet, Unswappable, WithheldFaces
from livecam.engines.protocol import Engine
from livecam.swap import features
from livecam.swap.align import align_matrix, warp_crop
from livecam.swap.assign import IdentityAssigner
from livecam.swap.blend import affine_roi
from livecam.swap.boost import boost_factor, merge_tiles, split_tiles
from livecam.swap.cover import FaceCover
from livecam.swap.enhance import FaceEnhancer
from livecam.swap.neural_models import NeuralModels

log = logging.getLogger(__name__)

# Soft edge of the kept eyes and mouth, as a fraction of the face's width (as the classic swap).
_KEPT_EDGE = 0.008

FloatArray = npt.NDArray[np.float32]


def read_emap(model_path: str | Path) -> FloatArray:
    """The (512, 512) float32 ``emap`` initializer of an inswapper ONNX file.

    insightface takes the graph's last initializer; we take the one named ``emap`` when there
    is one and fall back to the last, which is the same tensor in the released model.
    """
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model_path)).graph
    named = [i for i in graph.initializer if i.name == "emap"]
    init = named[0] if named else graph.initializer[-1]
    emap = numpy_helper.to_array(init).astype(np.float32)
    if emap.shape != (512, 512):
        raise ValueError(f"{model_path}: expected a (512, 512) emap initializer, got {emap.shape}")
    return emap


def latents_from_embeddings(embeddings: np.ndarray, emap: FloatArray) -> FloatArray:
    """inswapper's source input: ArcFace embeddings (N, 512) -> normalised latents (N, 512)."""
    emb = np.atleast_2d(np.asarray(embeddings, dtype=np.float32))
    normed = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    latent = normed @ emap
    return (latent / np.linalg.norm(latent, axis=1, keepdims=True)).astype(np.float32)


def crops_to_blob(crops_bgr: np.ndarray, mean: float, std: float) -> FloatArray:
    """(N, S, S, 3) uint8 BGR -> (N, 3, S, S) float32 RGB, ``(x - mean) / std`` as OpenCV does
    it in ``blobFromImage`` (multiplying by the float32 reciprocal)."""
    rgb = crops_bgr[..., ::-1].astype(np.float32)
    blob = (rgb - np.float32(mean)) * np.float32(1.0 / std)
    return np.ascontiguousarray(blob.transpose(0, 3, 1, 2))


def output_to_bgr(pred: np.ndarray) -> npt.NDArray[np.uint8]:
    """(N, 3, S, S) float in [0, 1] RGB -> (N, S, S, 3) uint8 BGR, truncating like insightface."""
    img = pred.astype(np.float32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(np.clip(255 * img, 0, 255).astype(np.uint8)[..., ::-1])


def paste_back(image_bgr: ImageBGR, face_bgr: np.ndarray, matrix: np.ndarray, *,
               keep_loops_xy: Sequence[np.ndarray] = (), keep_soft_px: float = 1.0) -> ImageBGR:
    """Lay the swapped crop back into ``image_bgr`` (not modified); returns a new image.

    ``face_bgr`` is the (S, S, 3) uint8 model output and ``matrix`` the (2, 3) image->crop
    transform it was aligned with. Same mask as insightface's ``INSwapper.get``, less the
    regions ``keep_loops_xy`` (polygons (K, 2) in frame pixels, e.g. the streamer's eyes and
    mouth interior), which keep the frame's own pixels behind a soft edge of ``keep_soft_px``.
    """
    import cv2

    size = face_bgr.shape[0]
    # margin beyond the erode and blur reach: the mask is zero there
    placement = affine_roi(matrix, crop_px=size, frame_shape=image_bgr.shape,
                           margin_px=lambda w_px, h_px: int((w_px + h_px) / 4) + 16)
    out = image_bgr.copy()
    if placement is None:
        return out
    roi_inverse, (x0, y0, x1, y1) = placement
    roi_size = (x1 - x0, y1 - y0)
    white = np.full((size, size), 255, dtype=np.float32)
    zero = (0.0, 0.0, 0.0)
    fake = np.asarray(cv2.warpAffine(face_bgr, roi_inverse, roi_size, borderValue=zero))
    mask = np.asarray(cv2.warpAffine(white, roi_inverse, roi_size, borderValue=zero), np.float32)
    mask[mask > 20] = 255
    rows, cols = np.where(mask == 255)
    if len(rows) == 0:
        return out
    mask_size = int(np.sqrt((rows.max() - rows.min()) * (cols.max() - cols.min())))
    k = max(mask_size // 10, 10)
    mask = np.asarray(cv2.erode(mask, np.ones((k, k), np.uint8), iterations=1), np.float32)
    k = max(mask_size // 20, 5)
    mask = np.asarray(cv2.GaussianBlur(mask, (2 * k + 1, 2 * k + 1), 0), np.float32)
    mask /= 255
    for loop in keep_loops_xy:
        mask *= 1.0 - features.region_alpha(np.asarray(loop, np.float32), (x0, y0),
                                            (mask.shape[0], mask.shape[1]), keep_soft_px)
    alpha = mask[:, :, None]
    roi = out[y0:y1, x0:x1]
    merged = alpha * fake + (1 - alpha) * roi.astype(np.float32)
    out[y0:y1, x0:x1] = merged.astype(np.uint8)
    return out


class InswapperModel:
    """inswapper preprocessing, one batched engine call, postprocessing and paste-back.

    ``engine`` runs the model (any backend); ``model_path`` is read once in ``open`` for the
    ``emap``. Only the pipeline thread calls ``swap``.
    """

    def __init__(self, engine: Engine, model_path: str | Path, *, crop_size_px: int = 128,
                 template: str = "arcface_128", mean: float = 0.0, std: float = 255.0,
                 max_batch: int = 8, pixel_boost_px: int | None = None,
                 enhancer: FaceEnhancer | None = None) -> None:
        self.engine = engine
        self.model_path = Path(model_path)
        self.crop_size_px = crop_size_px
        self.template = template
        self.mean, self.std = mean, std
        self.max_batch = max_batch
        # pixel boost (livecam.swap.boost): faces aligned at k * crop_size_px, swapped in k*k
        # interleaved tiles; the enhancer restores each swapped face after its paste-back
        self.pixel_boost_px = pixel_boost_px or crop_size_px
        self._boost = boost_factor(self.pixel_boost_px, crop_size_px)
        self.enhancer = enhancer
        self.emap: FloatArray | None = None

    def open(self) -> None:
        if self.emap is None:
            self.engine.open()
            self.emap = read_emap(self.model_path)
            if self.enhancer is not None:
                self.enhancer.open()

    def close(self) -> None:
        self.engine.close()
        if self.enhancer is not None:
            self.enhancer.close()
        self.emap = None

    def latents(self, embeddings: np.ndarray) -> FloatArray:
        """Source latents (N, 512) from raw or normalised ArcFace embeddings (N, 512)."""
        if self.emap is None:
            raise RuntimeError("InswapperModel is not open")
        return latents_from_embeddings(embeddings, self.emap)

    def align(self, image_bgr: ImageBGR, kps_xy: np.ndarray
              ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float64]]:
        """Aligned crops (N, S, S, 3) uint8 and their (N, 2, 3) matrices for keypoints (N, 5, 2);
        S is the pixel-boost size."""
        size = self.pixel_boost_px
        matrices = np.stack([align_matrix(k, size, self.template) for k in kps_xy])
        crops = np.stack([warp_crop(image_bgr, m, size) for m in matrices])
        return crops, matrices

    def crop_feeds(self, crops_bgr: np.ndarray, latents: np.ndarray
                   ) -> list[dict[str, FloatArray]]:
        """The engine feeds for aligned crops (N, S, S, 3) uint8 BGR and latents (N, 512): one
        per call of at most ``max_batch`` rows (with pixel boost each face is k * k tiles)."""
        k = self._boost
        if k > 1:
            crops_bgr = split_tiles(crops_bgr, k)
            latents = np.repeat(np.asarray(latents, np.float32), k * k, axis=0)
        names = [s.name for s in self.engine.inputs]
        target_name, source_name = names[0], names[1]
        blob = crops_to_blob(crops_bgr, self.mean, self.std)
        return [{target_name: blob[i:i + self.max_batch],
                 source_name: np.ascontiguousarray(latents[i:i + self.max_batch],
                                                   dtype=np.float32)}
                for i in range(0, len(blob), self.max_batch)]

    @property
    def output_name(self) -> str:
        return self.engine.outputs[0].name

    def faces_from(self, preds: Sequence[np.ndarray]) -> npt.NDArray[np.uint8]:
        """Swapped faces (N, S, S, 3) uint8 BGR from the engine outputs of :meth:`crop_feeds`'
        calls, in order (tiles merged back with pixel boost)."""
        faces = output_to_bgr(np.concatenate(preds))
        return merge_tiles(faces, self._boost) if self._boost > 1 else faces

    def swap_crops(self, crops_bgr: np.ndarray, latents: np.ndarray) -> npt.NDArray[np.uint8]:
        """Swapped faces (N, S, S, 3) uint8 BGR, in chunks of at most ``max_batch`` per call
        (with pixel boost, S = k * crop size and each face is k * k tiles in those calls)."""
        return self.faces_from([self.engine.run(feeds)[self.output_name]
                                for feeds in self.crop_feeds(crops_bgr, latents)])

    def paste(self, onto_bgr: ImageBGR, faces_bgr: np.ndarray, matrices: np.ndarray,
              kps_xy: np.ndarray, *, keep_loops_xy: Sequence[Sequence[np.ndarray]] = (),
              keep_soft_px: Sequence[float] = ()) -> ImageBGR:
        """Swapped faces (N, S, S, 3) with their (N, 2, 3) alignment matrices pasted onto
        ``onto_bgr`` (not modified; see :meth:`swap`), then the enhancer; a new image."""
        out = onto_bgr
        for i, (face, matrix) in enumerate(zip(faces_bgr, matrices, strict=True)):
            loops = keep_loops_xy[i] if i < len(keep_loops_xy) else ()
            soft = keep_soft_px[i] if i < len(keep_soft_px) else 1.0
            out = paste_back(out, face, matrix, keep_loops_xy=loops, keep_soft_px=soft)
        if self.enhancer is not None:
            out = self.enhancer.enhance(out, kps_xy)
        return out

    def swap(self, image_bgr: ImageBGR, kps_xy: np.ndarray, latents: np.ndarray, *,
             onto_bgr: ImageBGR | None = None,
             keep_loops_xy: Sequence[Sequence[np.ndarray]] = (),
             keep_soft_px: Sequence[float] = ()) -> ImageBGR:
        """Swap every face: keypoints (N, 5, 2) px in ArcFace order, latents (N, 512).

        ``keep_loops_xy[i]`` lists polygons of face i whose pixels stay the frame's own
        (:func:`paste_back`), ``keep_soft_px[i]`` their soft edge. All faces go through the
        model in one batched call; the result is a new image. The faces are read from
        ``image_bgr`` and pasted onto ``onto_bgr`` (same shape; default ``image_bgr``), e.g. a
        copy with other faces already covered.
        """
        out = image_bgr if onto_bgr is None else onto_bgr
        if len(kps_xy) == 0:
            return out
        crops, matrices = self.align(image_bgr, kps_xy)
        return self.paste(out, self.swap_crops(crops, latents), matrices, kps_xy,
                          keep_loops_xy=keep_loops_xy, keep_soft_px=keep_soft_px)


EmbeddingFn = Callable[[str], "np.ndarray | None"]


@dataclass(frozen=True)
class SwapPlan:
    """What :meth:`NeuralSwapStage.plan` decided for one packet, before the model runs.

    ``under``: the faces to cover; ``wanted``: every face an identity is chosen for (indices
    into ``packet.faces``; all covered when the engine does not answer); ``picked``: the faces
    to swap, with their ArcFace keypoints (N, 5, 2) px, latents (N, 512) float32, kept regions
    and soft edges (see :meth:`InswapperModel.swap`); ``down``: a remote engine was already
    down while planning (the recognizer).
    """

    packet: Packet
    under: WithheldFaces
    wanted: list[int]
    picked: list[int] = field(default_factory=list)
    kps_xy: np.ndarray | None = None
    latents: np.ndarray | None = None
    keep_loops_xy: list[list[np.ndarray]] = field(default_factory=list)
    keep_soft_px: list[float] = field(default_factory=list)
    down: bool = False


class NeuralSwapStage(StageBase):
    """``swap.mode: neural``: swaps each tracked face with its identity's embedding.

    Which identity a face gets: :class:`~livecam.swap.assign.IdentityAssigner` (runtime
    per-track choice, then ``assign`` by order of appearance, then the active identity).
    ``source_embedding(name)`` returns the (512,) ArcFace embedding of an identity (see
    :class:`livecam.swap.arcface.IdentityEmbeddings`), or None when it cannot be had: that
    face is covered. Faces analysis withheld (``packet.withheld``) are covered too, and every
    face of a frame the (remote) engine did not answer for, by ``cover``
    (:class:`~livecam.swap.cover.FaceCover`, default: hold then blur).
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
                 mouth_size: float = 1.0) -> None:
        self.model = model
        self.keep_eyes, self.keep_mouth, self.mouth_size = keep_eyes, keep_mouth, mouth_size
        self._assigner = IdentityAssigner(assign)
        self.source_embedding = source_embedding
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
        self.model.close()

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
        picked, embeddings, missing = [], [], []
        try:
            for i, name in enumerate(names):
                if name is None:
                    continue
                embedding = self.source_embedding(name) if faces.has_landmarks else None
                if embedding is None:
                    missing.append(i)
                else:
                    picked.append(i)
                    embeddings.append(embedding)
        except EngineUnavailableError:  # a remote recognizer is down
            return SwapPlan(packet, under, wanted, down=True)
        if missing:
            reason = (Unswappable.IDENTITY_MISSING if faces.has_landmarks
                      else Unswappable.NO_SWAP)
            under = WithheldFaces.concat([under, WithheldFaces.from_faces(faces[missing],
                                                                           reason)])
        if not picked:
            if len(under) == 0 or self.cover.shows_real_faces:
                return packet
            return SwapPlan(packet, under, wanted)
        return SwapPlan(packet, under, wanted, picked,
                        kps_xy=self._five_point(faces.landmarks_xy[picked]),
                        latents=self.model.latents(np.stack(embeddings)),
                        keep_loops_xy=[self._kept_loops(faces.landmarks_xy[i]) for i in picked],
                        keep_soft_px=[_KEPT_EDGE * float(np.ptp(faces.landmarks_xy[i][:, 0]))
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
        out = self.cover.cover(packet.image_bgr, plan.under, index)
        if plan.picked:
            assert faces_bgr is not None and matrices is not None and plan.kps_xy is not None
            out = self.model.paste(out, faces_bgr, matrices, plan.kps_xy,
                                   keep_loops_xy=plan.keep_loops_xy,
                                   keep_soft_px=plan.keep_soft_px)
            self.cover.remember(out, packet.faces[plan.picked], index)
        return packet.with_fields(image_bgr=out)

    def finish_down(self, plan: SwapPlan) -> Packet:
        """``plan``'s packet when a remote engine is down or late: every face meant to be
        swapped is covered, never sent as it is (the engine reconnects in the background)."""
        packet = plan.packet
        down = WithheldFaces.from_faces(packet.faces[plan.wanted], Unswappable.ENGINE_DOWN)
        return packet.with_fields(image_bgr=self.cover.cover(
            packet.image_bgr, WithheldFaces.concat([plan.under, down]), packet.frame.index))

    def _kept_loops(self, landmarks_xy: np.ndarray) -> list[np.ndarray]:
        """The streamer's regions to keep for one face's mesh (468+, 2)."""
        loops = []
        if self.keep_eyes:
            loops += [landmarks_xy[list(features.EYE_RIGHT_LOOP)],
                      landmarks_xy[list(features.EYE_LEFT_LOOP)]]
        if self.keep_mouth:
            mouth = landmarks_xy[list(features.MOUTH_INNER_LOOP)]
            centre = mouth.mean(axis=0)
            loops.append(centre + (mouth - centre) * self.mouth_size)
        return loops

    def health(self) -> dict | None:
        """The swap engine's link state when it is remote (``TritonEngine.health``), else None.
        Any thread."""
        health = getattr(self.model.engine, "health", None)
        return health() if callable(health) else None


def build_neural_stage(models: NeuralModels, load_identity: Callable[[str], object], *,
                       assign: tuple[str, ...] = (), cover: FaceCover | None = None,
                       keep_eyes: bool = True, keep_mouth: bool = True,
                       mouth_size: float = 1.0, pixel_boost_px: int | None = None,
                       enhancer: FaceEnhancer | None = None) -> NeuralSwapStage:
    """The neural swap stage for ``models`` (cheap; see :class:`NeuralModels`).

    ``keep_eyes`` / ``keep_mouth`` / ``mouth_size``: see :class:`NeuralSwapStage` (from
    ``swap.keep_eyes == "always"``, ``swap.keep_mouth``, ``swap.mouth_size``).
    ``pixel_boost_px`` (``swap.pixel_boost``) and ``enhancer`` (``swap.enhancer``, see
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
                           mouth_size=mouth_size)

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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from livecam.core.errors import EngineUnavailableError
from livecam.core.stage import StageBase
from livecam.core.types import ImageBGR, Packet
from livecam.engines.protocol import Engine
from livecam.swap.align import align_matrix, warp_crop
from livecam.swap.assign import IdentityAssigner
from livecam.swap.neural_models import NeuralModels

log = logging.getLogger(__name__)

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


def paste_back(image_bgr: ImageBGR, face_bgr: np.ndarray, matrix: np.ndarray) -> ImageBGR:
    """Lay the swapped crop back into ``image_bgr`` (not modified); returns a new image.

    ``face_bgr`` is the (S, S, 3) uint8 model output and ``matrix`` the (2, 3) image->crop
    transform it was aligned with. Same mask as insightface's ``INSwapper.get``.
    """
    import cv2

    size = face_bgr.shape[0]
    inverse = np.asarray(cv2.invertAffineTransform(np.asarray(matrix, np.float64)), np.float64)
    h, w = image_bgr.shape[:2]
    corners = np.array([[0, 0, 1], [size, 0, 1], [0, size, 1], [size, size, 1]], np.float64)
    mapped = corners @ inverse.T
    span = float(np.ptp(mapped[:, 0]) + np.ptp(mapped[:, 1]))
    margin = int(span / 4) + 16  # beyond the erode and blur reach: mask is zero there
    x0 = max(int(np.floor(mapped[:, 0].min())) - margin, 0)
    y0 = max(int(np.floor(mapped[:, 1].min())) - margin, 0)
    x1 = min(int(np.ceil(mapped[:, 0].max())) + margin, w)
    y1 = min(int(np.ceil(mapped[:, 1].max())) + margin, h)
    out = image_bgr.copy()
    if x1 <= x0 or y1 <= y0:
        return out
    roi_inverse = inverse.copy()
    roi_inverse[:, 2] -= (x0, y0)
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
                 max_batch: int = 8) -> None:
        self.engine = engine
        self.model_path = Path(model_path)
        self.crop_size_px = crop_size_px
        self.template = template
        self.mean, self.std = mean, std
        self.max_batch = max_batch
        self.emap: FloatArray | None = None

    def open(self) -> None:
        if self.emap is None:
            self.engine.open()
            self.emap = read_emap(self.model_path)

    def close(self) -> None:
        self.engine.close()
        self.emap = None

    def latents(self, embeddings: np.ndarray) -> FloatArray:
        """Source latents (N, 512) from raw or normalised ArcFace embeddings (N, 512)."""
        if self.emap is None:
            raise RuntimeError("InswapperModel is not open")
        return latents_from_embeddings(embeddings, self.emap)

    def align(self, image_bgr: ImageBGR, kps_xy: np.ndarray
              ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float64]]:
        """Aligned crops (N, S, S, 3) uint8 and their (N, 2, 3) matrices for keypoints (N, 5, 2)."""
        size = self.crop_size_px
        matrices = np.stack([align_matrix(k, size, self.template) for k in kps_xy])
        crops = np.stack([warp_crop(image_bgr, m, size) for m in matrices])
        return crops, matrices

    def swap_crops(self, crops_bgr: np.ndarray, latents: np.ndarray) -> npt.NDArray[np.uint8]:
        """Swapped faces (N, S, S, 3) uint8 BGR, in chunks of at most ``max_batch`` per call."""
        names = [s.name for s in self.engine.inputs]
        target_name, source_name = names[0], names[1]
        out_name = self.engine.outputs[0].name
        blob = crops_to_blob(crops_bgr, self.mean, self.std)
        preds = []
        for i in range(0, len(blob), self.max_batch):
            feeds = {target_name: blob[i:i + self.max_batch],
                     source_name: np.ascontiguousarray(latents[i:i + self.max_batch],
                                                       dtype=np.float32)}
            preds.append(self.engine.run(feeds)[out_name])
        return output_to_bgr(np.concatenate(preds))

    def swap(self, image_bgr: ImageBGR, kps_xy: np.ndarray, latents: np.ndarray) -> ImageBGR:
        """Swap every face: keypoints (N, 5, 2) px in ArcFace order, latents (N, 512).

        All faces go through the model in one batched call; the result is a new image.
        """
        if len(kps_xy) == 0:
            return image_bgr
        crops, matrices = self.align(image_bgr, kps_xy)
        faces = self.swap_crops(crops, latents)
        out = image_bgr
        for face, matrix in zip(faces, matrices, strict=True):
            out = paste_back(out, face, matrix)
        return out


def cover_faces(image_bgr: ImageBGR, boxes_xyxy: np.ndarray) -> ImageBGR:
    """A new image with each face box (N, 4) px, grown by a quarter, pixelated into blocks of
    about a sixth of the face: the frame goes out, the face is not recognisable.

    The seam for faces a remote engine could not swap (``EngineUnavailableError``) until the
    fail-closed module (hold the last good swap for a short gap, then cover) replaces it.
    """
    import cv2

    out = image_bgr.copy()
    h, w = out.shape[:2]
    for x1, y1, x2, y2 in np.asarray(boxes_xyxy, np.float64):
        pad_x, pad_y = 0.25 * (x2 - x1), 0.25 * (y2 - y1)
        x0, y0 = max(int(x1 - pad_x), 0), max(int(y1 - pad_y), 0)
        x3, y3 = min(int(np.ceil(x2 + pad_x)), w), min(int(np.ceil(y2 + pad_y)), h)
        if x3 - x0 < 2 or y3 - y0 < 2:
            continue
        blocks = (max((x3 - x0) * 6 // max(int(x2 - x1), 1), 2),
                  max((y3 - y0) * 6 // max(int(y2 - y1), 1), 2))
        small = cv2.resize(out[y0:y3, x0:x3], blocks, interpolation=cv2.INTER_AREA)
        out[y0:y3, x0:x3] = cv2.resize(small, (x3 - x0, y3 - y0),
                                       interpolation=cv2.INTER_NEAREST)
    return out


EmbeddingFn = Callable[[str], "np.ndarray | None"]


class NeuralSwapStage(StageBase):
    """``swap.mode: neural``: swaps each tracked face with its identity's embedding.

    Which identity a face gets: :class:`~livecam.swap.assign.IdentityAssigner` (runtime
    per-track choice, then ``assign`` by order of appearance, then the active identity).
    ``source_embedding(name)`` returns the (512,) ArcFace embedding of an identity (see
    :class:`livecam.swap.arcface.IdentityEmbeddings`), or None to leave that face alone.
    ``require_models()`` (called first in ``open``) raises :class:`ModelError` naming
    ``livecam models fetch`` when a model file is missing. Only the pipeline thread calls
    ``process``.
    """

    name = "swap"

    def __init__(self, model: InswapperModel, source_embedding: EmbeddingFn, *,
                 require_models: Callable[[], object] | None = None,
                 five_point: Callable[[np.ndarray], np.ndarray] | None = None,
                 assign: tuple[str, ...] = ()) -> None:
        self.model = model
        self._assigner = IdentityAssigner(assign)
        self.source_embedding = source_embedding
        self.require_models = require_models
        self._five_point = five_point

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
        faces = packet.faces
        if packet.state.bypass or len(faces) == 0 or not faces.has_landmarks:
            return packet
        assert self._five_point is not None, "process() before open()"
        names = [self._assigner.identity_for(packet.state, int(t)) for t in faces.track_ids]
        picked, embeddings = [], []
        try:
            for i, name in enumerate(names):
                embedding = self.source_embedding(name) if name else None
                if embedding is not None:
                    picked.append(i)
                    embeddings.append(embedding)
            if not picked:
                return packet
            kps = self._five_point(faces.landmarks_xy[picked])
            latents = self.model.latents(np.stack(embeddings))
            image = self.model.swap(packet.image_bgr, kps, latents)
        except EngineUnavailableError:
            # a remote engine is down or late: every face meant to be swapped is covered,
            # never sent as it is (the engine reconnects in the background)
            wanted = [i for i, name in enumerate(names) if name]
            return packet.with_fields(image_bgr=cover_faces(packet.image_bgr,
                                                            faces.boxes_xyxy[wanted]))
        return packet.with_fields(image_bgr=image)

    def health(self) -> dict | None:
        """The swap engine's link state when it is remote (``TritonEngine.health``), else None.
        Any thread."""
        health = getattr(self.model.engine, "health", None)
        return health() if callable(health) else None


def build_neural_stage(models: NeuralModels, load_identity: Callable[[str], object], *,
                       assign: tuple[str, ...] = ()) -> NeuralSwapStage:
    """The neural swap stage for ``models`` (cheap; see :class:`NeuralModels`).

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
                           std=swapper.std, max_batch=models.engine.max_batch)
    return NeuralSwapStage(model, models.embeddings(load_identity),
                           require_models=models.require, five_point=five_point, assign=assign)

"""The inswapper model: inswapper-family models driven by ArcFace embeddings.

Pre- and post-processing follow insightface 2.1's ``INSwapper.get`` operation for operation
(same alignment, same float32 arithmetic, same paste-back), so given the same keypoints and
model our output matches the reference within one grey level (tests/swap/test_neural_parity.py).
The paste-back is insightface's own rather than the classic swap's ``blend.feather_mask``:
parity with the reference needs its exact erode/blur sizes. It is computed on the face's region
of interest only, which gives the same pixels as insightface's full-frame version (its mask is
zero outside the face) at a fraction of the cost for HD frames.

The stage that drives it (which faces, which identity, covering) is
:class:`livecam.swap.neural.NeuralSwapStage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from livecam.core.types import ImageBGR
from livecam.engines.protocol import Engine
from livecam.swap import features
from livecam.swap.align import align_matrix, warp_crop
from livecam.swap.blend import affine_roi
from livecam.swap.boost import boost_factor, merge_tiles, split_tiles
from livecam.swap.enhance import FaceEnhancer

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
               keep_loops_xy: Sequence[np.ndarray] = (), keep_soft_px: float = 1.0,
               oval_xy: np.ndarray | None = None) -> ImageBGR:
    """Lay the swapped crop back into ``image_bgr`` (not modified); returns a new image.

    ``face_bgr`` is the (S, S, 3) uint8 model output and ``matrix`` the (2, 3) image->crop
    transform it was aligned with. Same mask as insightface's ``INSwapper.get``, less the
    regions ``keep_loops_xy`` (polygons (K, 2) in frame pixels, e.g. the streamer's eyes and
    mouth interior), which keep the frame's own pixels behind a soft edge of ``keep_soft_px``,
    and, given the face's outline ``oval_xy`` (36, 2) frame px, only inside it
    (:func:`livecam.swap.features.oval_alpha`; an outline with a point that is not finite
    leaves the square as it is).
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
    inside = features.oval_alpha(oval_xy, (x0, y0), (mask.shape[0], mask.shape[1]))
    if inside is not None:
        mask *= inside
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
              keep_soft_px: Sequence[float] = (),
              ovals_xy: Sequence[np.ndarray | None] = ()) -> ImageBGR:
        """Swapped faces (N, S, S, 3) with their (N, 2, 3) alignment matrices pasted onto
        ``onto_bgr`` (not modified; see :meth:`swap`), then the enhancer; a new image."""
        out = onto_bgr
        for i, (face, matrix) in enumerate(zip(faces_bgr, matrices, strict=True)):
            loops = keep_loops_xy[i] if i < len(keep_loops_xy) else ()
            soft = keep_soft_px[i] if i < len(keep_soft_px) else 1.0
            oval = ovals_xy[i] if i < len(ovals_xy) else None
            out = paste_back(out, face, matrix, keep_loops_xy=loops, keep_soft_px=soft,
                             oval_xy=oval)
        if self.enhancer is not None:
            out = self.enhancer.enhance(out, kps_xy, ovals_xy)
        return out

    def swap(self, image_bgr: ImageBGR, kps_xy: np.ndarray, latents: np.ndarray, *,
             onto_bgr: ImageBGR | None = None,
             keep_loops_xy: Sequence[Sequence[np.ndarray]] = (),
             keep_soft_px: Sequence[float] = (),
             ovals_xy: Sequence[np.ndarray | None] = ()) -> ImageBGR:
        """Swap every face: keypoints (N, 5, 2) px in ArcFace order, latents (N, 512).

        ``keep_loops_xy[i]`` lists polygons of face i whose pixels stay the frame's own
        (:func:`paste_back`), ``keep_soft_px[i]`` their soft edge, ``ovals_xy[i]`` its outline
        (the swap stays inside it; none: insightface's square). All faces go through the
        model in one batched call; the result is a new image. The faces are read from
        ``image_bgr`` and pasted onto ``onto_bgr`` (same shape; default ``image_bgr``), e.g. a
        copy with other faces already covered.
        """
        out = image_bgr if onto_bgr is None else onto_bgr
        if len(kps_xy) == 0:
            return out
        crops, matrices = self.align(image_bgr, kps_xy)
        return self.paste(out, self.swap_crops(crops, latents), matrices, kps_xy,
                          keep_loops_xy=keep_loops_xy, keep_soft_px=keep_soft_px,
                          ovals_xy=ovals_xy)

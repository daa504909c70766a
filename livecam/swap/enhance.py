"""The face enhancer: GFPGAN, GPEN-BFR or CodeFormer on each swapped face, blended in.

Every step follows the reference implementation that GFPGAN and CodeFormer ship with
(facexlib 0.3's ``FaceRestoreHelper``, basicsr's ``img2tensor``/``tensor2img``):

- alignment: the face's 5 points onto the model's template (``ffhq_512`` for GFPGAN, GPEN-512
  and CodeFormer; ``arcface_128`` at 256 px for GPEN-256, the crop FaceFusion gives it), a
  similarity; the crop is ``cv2.warpAffine``, bilinear, with facexlib's grey border
  (135, 133, 132);
- input: RGB, ``x / 255`` (float64, then float32), ``(x - 0.5) / 0.5``, NCHW; CodeFormer's
  ``weight`` input gets ``fidelity`` (0: the strongest restoration, 1: closest to its input);
- output: clamp to [-1, 1], ``(x + 1) / 2``, RGB -> BGR, ``x * 255``, rounded, uint8;
- paste-back: facexlib's square mask (the crop's footprint warped back, eroded by 2x2, then
  eroded and Gaussian-blurred by kernels that grow with the face's area), the frame truncated
  to uint8. ``blend`` scales that mask (FaceFusion's ``face_enhancer_blend``: 1 = the enhanced
  face only).

One departure: the similarity is Umeyama's least squares over the five points (as every other
alignment in livecam and on the GPU) where facexlib calls ``cv2.estimateAffinePartial2D`` with
LMEDS; ``tests/swap/test_enhance_parity.py`` measures what that changes. The paste-back works on
the face's region only (the mask is zero elsewhere), which gives the reference's pixels without
warping whole frames.

The enhancer runs inside the swap, on the faces that were swapped and only those: it never
restores a face that is shown covered (a restorer would rebuild a blurred real face).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from livecam.core.errors import ConfigError
from livecam.core.types import ImageBGR
from livecam.engines.protocol import Engine, TensorSpec
from livecam.swap import features
from livecam.swap.align import align_matrix

if TYPE_CHECKING:
    from livecam.config.engine import EngineConfig, ModelsConfig
    from livecam.engines.manifest import ModelManifest
    from livecam.engines.store import ModelStore

log = logging.getLogger(__name__)

#: facexlib's border colour for the parts of the crop outside the frame (BGR).
CROP_BORDER_BGR = (135.0, 133.0, 132.0)


def warp_enhancer_crop(image_bgr: ImageBGR, matrix: np.ndarray, size_px: int) -> ImageBGR:
    """The (size, size, 3) uint8 crop as facexlib's ``align_warp_face`` takes it."""
    import cv2

    crop = cv2.warpAffine(image_bgr, np.asarray(matrix, np.float64), (size_px, size_px),
                          borderMode=cv2.BORDER_CONSTANT, borderValue=CROP_BORDER_BGR)
    return np.asarray(crop, np.uint8)


def crops_to_input(crops_bgr: np.ndarray) -> npt.NDArray[np.float32]:
    """(N, S, S, 3) uint8 BGR -> (N, 3, S, S) float32 RGB in [-1, 1], as GFPGAN does it
    (``img2tensor(crop / 255.)`` then ``normalize(0.5, 0.5)``)."""
    rgb = (crops_bgr[..., ::-1] / 255.0).astype(np.float32)
    blob = (rgb - np.float32(0.5)) / np.float32(0.5)
    return np.ascontiguousarray(blob.transpose(0, 3, 1, 2))


def output_to_bgr(pred: np.ndarray) -> npt.NDArray[np.uint8]:
    """(N, 3, S, S) float RGB in about [-1, 1] -> (N, S, S, 3) uint8 BGR, as basicsr's
    ``tensor2img(min_max=(-1, 1))``: clamp, ``(x + 1) / 2``, ``* 255``, round."""
    x = np.clip(np.asarray(pred, np.float32), np.float32(-1.0), np.float32(1.0))
    x = (x + np.float32(1.0)) / np.float32(2.0)
    img = np.round(x.transpose(0, 2, 3, 1)[..., ::-1] * np.float32(255.0))
    return np.ascontiguousarray(img.astype(np.uint8))


def paste_restored(image_bgr: ImageBGR, restored_bgr: np.ndarray, matrix: np.ndarray, *,
                   blend: float = 1.0, oval_xy: np.ndarray | None = None) -> ImageBGR:
    """Lay a restored crop back into ``image_bgr`` (not modified) with facexlib's square mask
    times ``blend``; returns a new image.

    ``restored_bgr`` (S, S, 3) uint8, ``matrix`` (2, 3) frame -> crop. At ``blend`` 1 this is
    ``FaceRestoreHelper.paste_faces_to_input_image`` (``upscale_factor`` 1, no parsing model)
    for one face. Given the face's outline ``oval_xy`` (36, 2) frame px, only inside it, as
    the swap's paste-back (:func:`livecam.swap.inswapper.paste_back`).
    """
    import cv2

    from livecam.swap.blend import affine_roi

    size = restored_bgr.shape[0]
    # margin beyond the erosion and blur reach (3 w_edge <= side * 0.15)
    placement = affine_roi(matrix, crop_px=size, frame_shape=image_bgr.shape,
                           margin_px=lambda w_px, h_px: int(max(w_px, h_px) / 5) + 8)
    out = image_bgr.copy()
    if placement is None:
        return out
    roi_inverse, (x0, y0, x1, y1) = placement
    roi_size = (x1 - x0, y1 - y0)
    inv_restored = cv2.warpAffine(restored_bgr, roi_inverse, roi_size)
    inv_mask = np.asarray(cv2.warpAffine(np.ones((size, size), np.float32), roi_inverse,
                                         roi_size), np.float32)
    eroded = np.asarray(cv2.erode(inv_mask, np.ones((2, 2), np.uint8)), np.float32)
    pasted = eroded[:, :, None] * inv_restored
    w_edge = int(float(np.sum(eroded)) ** 0.5) // 20
    centre = cv2.erode(eroded, np.ones((w_edge * 2, w_edge * 2), np.uint8))
    soft = np.asarray(cv2.GaussianBlur(centre, (w_edge * 2 + 1, w_edge * 2 + 1), 0), np.float32)
    inside = features.oval_alpha(oval_xy, (x0, y0), (soft.shape[0], soft.shape[1]))
    if inside is not None:
        soft = soft * inside
    alpha = soft[:, :, None] * np.float32(blend)
    roi = out[y0:y1, x0:x1]
    merged = alpha * pasted + (1 - alpha) * roi
    out[y0:y1, x0:x1] = merged.astype(np.uint8)
    return out


def _image_and_weight(inputs: tuple[TensorSpec, ...]) -> tuple[str, str | None]:
    """The image input (the first 4-D one) and the optional fidelity input (``weight``)."""
    image = next((s.name for s in inputs if len(s.shape) == 4), None)
    if image is None:
        raise ValueError("an enhancer model needs a (N, 3, S, S) image input")
    weight = next((s.name for s in inputs if s.name != image), None)
    return image, weight


class FaceEnhancer:
    """Aligns, restores and pastes back faces (see the module docstring).

    ``engine`` runs the restorer (any backend; one face per call, as the released files
    declare batch 1). ``size_px``/``template``: the model's crop. ``blend`` in [0, 1]: how much
    of the restored face replaces the swapped one. ``fidelity`` in [0, 1]: CodeFormer's
    ``weight`` (other models have no such input and ignore it). ``require()`` (optional) is
    called first in ``open`` and raises :class:`ModelError` naming ``livecam models fetch``.
    Only the pipeline thread calls the methods.
    """

    def __init__(self, engine: Engine, *, size_px: int = 512, template: str = "ffhq_512",
                 blend: float = 0.8, fidelity: float = 0.5,
                 require: Callable[[], object] | None = None) -> None:
        if not 0.0 <= blend <= 1.0 or not 0.0 <= fidelity <= 1.0:
            raise ValueError("blend and fidelity must lie in [0, 1]")
        self.engine = engine
        self.size_px, self.template = size_px, template
        self.blend, self.fidelity = blend, fidelity
        self.require = require
        self._names: tuple[str, str | None, str] | None = None

    def open(self) -> None:
        if self._names is None:
            if self.require is not None:
                self.require()
            self.engine.open()
            image, weight = _image_and_weight(tuple(self.engine.inputs))
            self._names = (image, weight, self.engine.outputs[0].name)

    def close(self) -> None:
        self.engine.close()
        self._names = None

    def align(self, image_bgr: ImageBGR, kps_xy: np.ndarray
              ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float64]]:
        """Crops (N, S, S, 3) uint8 and their (N, 2, 3) frame -> crop matrices for (N, 5, 2)
        keypoints in ArcFace order."""
        size = self.size_px
        matrices = np.stack([align_matrix(k, size, self.template) for k in kps_xy])
        crops = np.stack([warp_enhancer_crop(image_bgr, m, size) for m in matrices])
        return crops, matrices

    def restore(self, crops_bgr: np.ndarray) -> npt.NDArray[np.uint8]:
        """Restored crops (N, S, S, 3) uint8 BGR, one engine call per face."""
        if self._names is None:
            raise RuntimeError("FaceEnhancer is not open")
        image, weight, out = self._names
        blob = crops_to_input(crops_bgr)
        preds = []
        for i in range(len(blob)):
            feeds: dict[str, np.ndarray] = {image: blob[i:i + 1]}
            if weight is not None:
                feeds[weight] = np.array([self.fidelity], np.float64)
            preds.append(self.engine.run(feeds)[out])
        return output_to_bgr(np.concatenate(preds))

    def enhance(self, image_bgr: ImageBGR, kps_xy: np.ndarray,
                ovals_xy: Sequence[np.ndarray | None] = ()) -> ImageBGR:
        """Every face of (N, 5, 2) keypoints restored and blended in, inside its outline
        ``ovals_xy[i]`` where given; a new image (or ``image_bgr`` itself when N is 0 or
        ``blend`` is 0)."""
        if len(kps_xy) == 0 or self.blend == 0.0:
            return image_bgr
        crops, matrices = self.align(image_bgr, kps_xy)
        out = image_bgr
        for i, (face, matrix) in enumerate(zip(self.restore(crops), matrices, strict=True)):
            oval = ovals_xy[i] if i < len(ovals_xy) else None
            out = paste_restored(out, face, matrix, blend=self.blend, oval_xy=oval)
        return out


def enhancer_manifest(store: ModelStore, name: str) -> ModelManifest:
    """The manifest of enhancer ``name`` (``swap.enhancer``) in ``store``; raises
    :class:`ConfigError` listing the enhancers when it is none (CPU path and GPU pipeline)."""
    enhancers = sorted(n for n, m in store.manifests.items() if m.kind == "enhancer")
    if name not in enhancers:
        raise ConfigError(f"swap.enhancer: {name!r} is not an enhancer manifest (available: "
                          f"none, {', '.join(enhancers) or 'no others'}; see `livecam models "
                          "list`)")
    return store.manifest(name)


def build_face_enhancer(name: str, *, blend: float, fidelity: float,
                        engine_config: EngineConfig, models_config: ModelsConfig
                        ) -> FaceEnhancer | None:
    """The enhancer ``swap.enhancer`` names (None for ``none``), cheap: the model file is
    verified in ``open()``. Raises :class:`ConfigError` when ``name`` is no enhancer manifest."""
    if name == "none":
        return None
    from livecam.engines.lazy import LazyEngine
    from livecam.engines.registry import choose_backend, create_engine, model_store

    store = model_store(models_config)
    manifest = enhancer_manifest(store, name)
    choice = choose_backend(engine_config.backend, engine_config.device)
    log.info("face enhancer: %s on the %s engine, blend %.2f", name, choice.name, blend)

    def make() -> Engine:
        digest = store.verify(name)
        return create_engine(manifest, store.path(name), digest, engine_config, choice)

    return FaceEnhancer(LazyEngine(choice.name, make), size_px=manifest.crop_size_px or 512,
                        template=manifest.template or "ffhq_512", blend=blend,
                        fidelity=fidelity, require=lambda: store.require(name))

"""The neural swap (inswapper family) on tensors: align, crop, generate, colour, paste.

:class:`GpuInswapper` is the GPU twin of :class:`livecam.swap.inswapper.InswapperModel`: the same
alignment (5 points -> arcface_128 template), the same crop (``cv2.warpAffine`` semantics), the
same blob (RGB, ``(x - mean) / std``), the same truncation of the output to uint8 and the same
insightface paste-back (:mod:`livecam.gpupipe.swap.paste`). Every step works on batches of
faces from many frames at once and contains no host sync, so the pipeline can capture it in a
CUDA graph.

The generator is any object with ``run_torch(feeds, stream=None) -> dict`` over device tensors
and ``inputs``/``outputs`` specs (:class:`livecam.engines.torch_engine.TorchEngine`); for graph
capture by the pipeline, open that engine with ``cuda_graphs=False`` (graphs do not nest).
Only the thread that owns the CUDA stream calls the methods.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from livecam.gpupipe.swap.align import align_matrices, template_tensor
from livecam.gpupipe.swap.blend import lowfreq_gain
from livecam.gpupipe.swap.boost import merge_tiles, repeat_latents, split_tiles
from livecam.gpupipe.swap.keep import KeepLoops
from livecam.gpupipe.swap.paste import footprint_px, insightface_paste_
from livecam.gpupipe.swap.warp import warp_affine
from livecam.swap.boost import boost_factor


def latents_from_embeddings(embeddings: torch.Tensor, emap: torch.Tensor) -> torch.Tensor:
    """inswapper's source input (N, 512) from ArcFace embeddings (N, 512); float32, as
    :func:`livecam.swap.inswapper.latents_from_embeddings`."""
    emb = embeddings.float()
    normed = emb / emb.norm(dim=1, keepdim=True)
    latent = normed @ emap.float()
    return latent / latent.norm(dim=1, keepdim=True)


class GpuInswapper:
    """Batched inswapper pre/post-processing around a torch-side engine (see module doc).

    ``crop_px`` and ``template`` as the model manifest says (128, ``arcface_128``);
    ``mean``/``std`` the input normalisation (0, 255 for inswapper). ``window_px`` is the side
    of the frame window the paste-back works in (must exceed the face's crop footprint, see
    :func:`livecam.gpupipe.swap.paste.mask_fits_window`). ``colour_blur_px`` > 0 adds a
    low-frequency colour match of the generated face to the target crop (off by default, like
    insightface).
    """

    def __init__(self, engine: Any, *, crop_px: int = 128, template: str = "arcface_128",
                 mean: float = 0.0, std: float = 255.0, window_px: int = 640,
                 colour_blur_px: float = 0.0, pixel_boost_px: int | None = None) -> None:
        self.engine = engine
        # pixel boost (livecam.swap.boost): crops aligned at pixel_boost_px, the generator run
        # on k*k interleaved model-size tiles per face; crop_px is the aligned crop's size
        self.model_px = crop_px
        self.crop_px = pixel_boost_px or crop_px
        self._k = boost_factor(self.crop_px, crop_px)
        self.template_name = template
        self.mean, self.std = mean, std
        self.window_px = window_px
        self.colour_blur_px = colour_blur_px
        self.template: torch.Tensor | None = None
        self._template_host = np.zeros((5, 2), np.float32)
        self._names: tuple[str, str, str] | None = None
        self.latent_dim = 0  # the source latent's size, from the engine's input spec (open)

    def open(self, device: torch.device | str) -> None:
        """Put the template on ``device`` and resolve the engine's tensor names (engine must
        be open)."""
        self.template = template_tensor(self.crop_px, self.template_name, device=device)
        self._template_host = self.template.cpu().numpy()
        inputs = list(self.engine.inputs)
        image = next(s.name for s in inputs if len(s.shape) == 4)
        latent_spec = next(s for s in inputs if len(s.shape) == 2)
        self._names = (image, latent_spec.name, self.engine.outputs[0].name)
        self.latent_dim = int(latent_spec.shape[1])

    def crops(self, frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
              five_xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Alignment matrices (N, 2, 3) frame -> crop and aligned crops (N, s, s, 3) float BGR
        (integer values) for keypoints ``five_xy`` (N, 5, 2) px in ArcFace order."""
        if self.template is None:
            raise RuntimeError("GpuInswapper is not open: call open(device) first")
        matrices = align_matrices(five_xy, self.template)
        crops = warp_affine(frames_bhwc_u8, frame_index, matrices, self.crop_px, self.crop_px)
        return matrices, crops

    def footprints_px(self, kps_n52: np.ndarray) -> np.ndarray:
        """(N,) the paste window side each face needs, from its keypoints on the host
        (:func:`~livecam.gpupipe.swap.paste.footprint_px`; after :meth:`open`)."""
        return footprint_px(kps_n52, self._template_host, self.crop_px)

    def blob(self, crops_nhwc: torch.Tensor) -> torch.Tensor:
        """(N, 3, s, s) float32 RGB network input from BGR crops, as ``crops_to_blob`` (with
        pixel boost: (N k k, 3, s / k, s / k), the tiles of each face in turn)."""
        if self._k > 1:
            crops_nhwc = split_tiles(crops_nhwc, self._k)
        rgb = crops_nhwc.flip(-1).permute(0, 3, 1, 2)
        return ((rgb - self.mean) * float(np.float32(1.0 / self.std))).contiguous()

    def predict(self, blob: torch.Tensor, latents: torch.Tensor,
                stream: Any = None) -> torch.Tensor:
        """The generator's raw output (N, 3, s, s), RGB in [0, 1], in the engine's dtype. With
        an engine running CUDA graphs this is its static buffer: use it before the next call."""
        assert self._names is not None, "predict() before open()"
        image, latent, out = self._names
        if self._k > 1:
            latents = repeat_latents(latents, self._k)
        return self.engine.run_torch({image: blob, latent: latents}, stream)[out]

    def to_faces(self, pred: torch.Tensor) -> torch.Tensor:
        """(N, s, s, 3) float BGR with integer values: the uint8 output, truncated like
        insightface's ``astype(np.uint8)`` (pixel boost: the tiles interleaved back)."""
        faces = torch.clamp(255.0 * pred.float(), 0.0, 255.0).floor()
        faces = faces.permute(0, 2, 3, 1).flip(-1)
        return merge_tiles(faces, self._k) if self._k > 1 else faces

    def generate(self, blob: torch.Tensor, latents: torch.Tensor,
                 stream: Any = None) -> torch.Tensor:
        """Swapped faces (N, s, s, 3) float BGR with integer values (the uint8 output)."""
        return self.to_faces(self.predict(blob, latents, stream))

    def colour_match(self, faces_nhwc: torch.Tensor, crops_nhwc: torch.Tensor) -> torch.Tensor:
        """The faces with the target crop's low-frequency light (see ``lowfreq_gain``)."""
        if self.colour_blur_px <= 0:
            return faces_nhwc
        src = faces_nhwc.permute(0, 3, 1, 2)
        tgt = crops_nhwc.permute(0, 3, 1, 2)
        weight = torch.ones_like(src[:, :1])
        gain = lowfreq_gain(src, tgt, weight, self.colour_blur_px)
        return torch.floor((src * gain).clamp(0.0, 255.0)).permute(0, 2, 3, 1)

    def paste_(self, frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
               faces_nhwc: torch.Tensor, matrices: torch.Tensor,
               face_valid: torch.Tensor, *, hands_bhw_u8: torch.Tensor | None = None,
               keep: KeepLoops | None = None, window_px: int | None = None) -> torch.Tensor:
        """insightface's paste-back of every valid face, in place (see ``insightface_paste_``;
        ``hands_bhw_u8``: hands kept in front; ``keep``: the streamer's eyes and mouth;
        ``window_px``: this call's paste window, None: :attr:`window_px`)."""
        return insightface_paste_(frames_bhwc_u8, frame_index, faces_nhwc, matrices, face_valid,
                                  window_px=window_px or self.window_px,
                                  hands_bhw_u8=hands_bhw_u8, keep=keep)

    def swap_(self, frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
              five_xy: torch.Tensor, latents: torch.Tensor, face_valid: torch.Tensor,
              stream: Any = None) -> torch.Tensor:
        """The whole swap of N faces into B frames, in place; returns the frames."""
        matrices, crops = self.crops(frames_bhwc_u8, frame_index, five_xy)
        faces = self.generate(self.blob(crops), latents, stream)
        faces = self.colour_match(faces, crops)
        return self.paste_(frames_bhwc_u8, frame_index, faces, matrices, face_valid)

"""The face enhancer on tensors: the GPU twin of :mod:`livecam.swap.enhance`.

:class:`GpuFaceEnhancer` aligns faces to the restorer's template (the same 5-point similarity as
the swap), crops them with facexlib's grey border, builds the network input, converts the output
and pastes it back with facexlib's square mask times ``blend``, for N faces of B frames at once,
with static shapes and no host sync, so the GPU pipeline can capture it in its graphs.

facexlib's mask has face-size-dependent kernels (``w_edge = floor(sqrt(area)) // 20``); as in
:mod:`livecam.gpupipe.swap.paste`, they are done without data-dependent shapes:

- the warped crop's coverage is exact from the bilinear weights: ``cov(u) * cov(v)`` with
  ``cov(t) = clamp(min(t + 1, S - t), 0, 1)`` at crop coordinates (u, v);
- the 2x2 erosion is the minimum of that coverage at the pixel and its left/upper neighbours;
  its sum over the window is the face's area, hence ``w_edge`` per face, on the device;
- the second erosion (a ``2 w_edge`` box) of the fully covered region, a convex set, is exact
  from the box's corners; the Gaussian is a separable convolution with per-face taps.

The restored face is multiplied by the 2x2-eroded coverage before blending, as facexlib does.
Everything works in a ``window_px`` square per face (the crop's footprint must fit; see
:func:`livecam.gpupipe.swap.paste.mask_fits_window`). Only the thread owning the tensors calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from livecam.gpupipe.swap.align import align_matrices, template_tensor
from livecam.gpupipe.swap.blend import window_origins
from livecam.gpupipe.swap.keep import KeepLoops
from livecam.gpupipe.swap.paste import blend_windows_, gaussian_weights
from livecam.gpupipe.swap.warp import affine_grid_px, sample_bilinear_hwc
from livecam.swap.enhance import CROP_BORDER_BGR


def enhancer_input(crops_nhwc: torch.Tensor) -> torch.Tensor:
    """(N, S, S, 3) BGR with integer values -> (N, 3, S, S) float32 RGB, ``(x/255 - 0.5)/0.5``."""
    rgb = crops_nhwc.float().flip(-1).permute(0, 3, 1, 2) / 255.0
    return ((rgb - 0.5) / 0.5).contiguous()


def enhancer_faces(pred: torch.Tensor) -> torch.Tensor:
    """(N, 3, S, S) RGB output in about [-1, 1] -> (N, S, S, 3) float BGR with integer values
    (clamp, ``(x + 1) / 2``, ``* 255``, rounded: basicsr's ``tensor2img``)."""
    x = (pred.float().clamp(-1.0, 1.0) + 1.0) / 2.0
    return torch.round(x.permute(0, 2, 3, 1).flip(-1) * 255.0)


def _coverage(u: torch.Tensor, v: torch.Tensor, size: int) -> torch.Tensor:
    """A bilinear-warped all-ones S x S image at crop coordinates (u, v)."""
    cu = torch.clamp(torch.minimum(u + 1.0, size - u), 0.0, 1.0)
    cv = torch.clamp(torch.minimum(v + 1.0, size - v), 0.0, 1.0)
    return cu * cv


def restore_paste_(frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
                   faces_nhwc: torch.Tensor, matrix_2x3: torch.Tensor,
                   face_valid: torch.Tensor, *, blend: float, window_px: int,
                   hands_bhw_u8: torch.Tensor | None = None,
                   keep: KeepLoops | None = None) -> torch.Tensor:
    """Paste N restored crops into their frames in place with facexlib's mask times ``blend``.

    ``frames_bhwc_u8`` (B, H, W, 3) uint8, written face after face; ``faces_nhwc`` (N, S, S, 3)
    float BGR integer-valued; ``matrix_2x3`` (N, 2, 3) frame -> crop; ``frame_index`` (N,)
    int64; ``face_valid`` (N,) bool; ``hands_bhw_u8`` (B, H, W) uint8 or None: hands kept in
    front and ``keep`` the streamer's eyes and mouth
    (:func:`livecam.gpupipe.swap.paste.blend_windows_`). Returns the frames.
    """
    height, width = frames_bhwc_u8.shape[1], frames_bhwc_u8.shape[2]
    n, size = faces_nhwc.shape[0], faces_nhwc.shape[1]
    win = min(window_px, height, width)
    origin = window_origins(matrix_2x3, size, win, height, width)
    grid = affine_grid_px(matrix_2x3, win, win, origin)  # (N, win, win, 2) crop coordinates
    fake = sample_bilinear_hwc(faces_nhwc, torch.arange(n, device=faces_nhwc.device), grid,
                               border="constant", round_uint8=True)
    lin = matrix_2x3[:, :, :2].float()  # d(u, v) / d(x, y): column 0 = one pixel right
    dx = lin[:, :, 0][:, None, None, :]
    dy = lin[:, :, 1][:, None, None, :]
    # 2x2 erosion (OpenCV's anchor: the pixel and its left and upper neighbours)
    eroded = grid.new_ones(grid.shape[:3])
    for shift in (0.0 * dx, dx, dy, dx + dy):
        moved = grid - shift
        eroded = torch.minimum(eroded, _coverage(moved[..., 0], moved[..., 1], size))
    area = eroded.sum(dim=(1, 2)).double()
    w_edge = torch.floor(torch.floor(torch.sqrt(area)) / 20.0)  # (N,)
    # erosion of the fully covered region by a 2 w_edge box (offsets -w_edge .. w_edge - 1),
    # plus the 2x2 step before it (one more pixel left and up): every corner inside [0, S-1]
    lo = (-w_edge - 1.0).float()
    hi = (w_edge - 1.0).float()
    reach_min = (torch.minimum(lin[:, :, 0] * lo[:, None], lin[:, :, 0] * hi[:, None])
                 + torch.minimum(lin[:, :, 1] * lo[:, None], lin[:, :, 1] * hi[:, None]))
    reach_max = (torch.maximum(lin[:, :, 0] * lo[:, None], lin[:, :, 0] * hi[:, None])
                 + torch.maximum(lin[:, :, 1] * lo[:, None], lin[:, :, 1] * hi[:, None]))
    near = grid + reach_min[:, None, None, :]
    far = grid + reach_max[:, None, None, :]
    centre = ((near >= 0.0).all(dim=-1) & (far <= size - 1.0).all(dim=-1)).float()
    max_ksize = 2 * (win // 20) + 1  # area <= win * win, so w_edge <= win // 20
    taps = gaussian_weights(2 * w_edge + 1, max_ksize)  # (N, K)
    pad = max_ksize // 2
    soft = F.conv2d(centre[None], taps[:, None, :, None], padding=(pad, 0), groups=n)
    soft = F.conv2d(soft, taps[:, None, None, :], padding=(0, pad), groups=n)[0]
    alpha = (soft * float(blend) * face_valid[:, None, None].float())[..., None]
    pasted = eroded[..., None] * fake
    return blend_windows_(frames_bhwc_u8, frame_index, origin, pasted, alpha,
                          hands_bhw_u8=hands_bhw_u8, keep=keep)


def enhancer_window_px(paste_window_px: int, *, crop_px: int, template: str, size_px: int,
                       enhancer_template: str) -> int:
    """The enhancer's paste window for a swap whose paste window is ``paste_window_px``: the
    restorer's crop footprint of the largest face the swap's window holds (the FFHQ crop is
    about 1.18 times the arcface crop), plus a margin, in multiples of 32 px."""
    from livecam.swap.align import align_matrix, template_xy

    five = template_xy(template, crop_px)  # a face that fills the swap's crop exactly
    matrix = align_matrix(five, size_px, enhancer_template)
    scale = float(abs(matrix[0, 0] * matrix[1, 1] - matrix[0, 1] * matrix[1, 0])) ** 0.5
    ratio = size_px / (scale * crop_px)
    return int(-(-(paste_window_px * ratio * 1.04) // 32) * 32)


class GpuFaceEnhancer:
    """Batched enhancer pre/post-processing around a torch-side engine (``run_torch(feeds,
    stream) -> dict`` over device tensors, ``inputs``/``outputs`` specs; see
    :class:`livecam.gpupipe.swap.neural.GpuInswapper`). ``size_px``/``template`` from the model's
    manifest; ``blend`` and ``fidelity`` as :class:`livecam.swap.enhance.FaceEnhancer`;
    ``window_px`` the paste window (the crop's footprint in the frame must fit in it);
    ``window_for(paste_window_px)``: the window to use after a swap pasted in another window
    than the usual one (:func:`enhancer_window_px`; None: always ``window_px``)."""

    def __init__(self, engine: Any, *, size_px: int = 512, template: str = "ffhq_512",
                 blend: float = 0.8, fidelity: float = 0.5, window_px: int = 768,
                 window_for: Callable[[int], int] | None = None) -> None:
        self.engine = engine
        self.size_px, self.template_name = size_px, template
        self.blend, self.fidelity = blend, fidelity
        self.window_px = window_px
        self._window_for = window_for
        self._windows: dict[int, int] = {}
        self.template: torch.Tensor | None = None
        self._names: tuple[str, str | None, str] | None = None
        self._weight: torch.Tensor | None = None
        self._border: torch.Tensor | None = None
        self._batch = 0  # faces per engine call: the file's fixed batch, 0 = any

    def open(self, device: torch.device | str) -> None:
        """Template and fidelity on ``device``; the engine's tensor names (engine open)."""
        from livecam.swap.enhance import _image_and_weight

        self.place(device)
        inputs = tuple(self.engine.inputs)
        image, weight = _image_and_weight(inputs)
        self._names = (image, weight, self.engine.outputs[0].name)
        self._weight = torch.tensor([self.fidelity], dtype=torch.float64, device=device)
        # the released restorers declare batch 1 (their graphs may reshape with it): a fixed
        # batch is honoured by running the faces in chunks of it (static, so still capturable)
        batch = next(s.shape[0] for s in inputs if s.name == image)
        self._batch = batch if isinstance(batch, int) and batch > 0 else 0

    def place(self, device: torch.device | str) -> None:
        """The alignment template and the crop border on ``device`` (all that :meth:`crops` and
        :meth:`fits` need; :meth:`open` does this). Made once here, not per call: a CUDA graph
        cannot capture a copy from pageable host memory (made per call, the border would make
        every enhancer graph fail to capture and run eagerly)."""
        self.template = template_tensor(self.size_px, self.template_name, device=device)
        self._border = torch.tensor(CROP_BORDER_BGR, device=device)

    def window(self, paste_window_px: int | None = None) -> int:
        """The enhancer's paste window after a swap pasted in ``paste_window_px`` (None: the
        usual one), computed once per size."""
        if paste_window_px is None or self._window_for is None:
            return self.window_px
        if paste_window_px not in self._windows:
            self._windows[paste_window_px] = self._window_for(paste_window_px)
        return self._windows[paste_window_px]

    def fits(self, five_xy: torch.Tensor, paste_window_px: int | None = None) -> torch.Tensor:
        """(N,) bool: the restorer's crop footprint of each face fits the paste window (a
        face that does not is left as swapped, not restored: its paste would be cut)."""
        if self.template is None:
            raise RuntimeError("GpuFaceEnhancer is not open: call open(device) first")
        from livecam.gpupipe.swap.paste import mask_fits_window

        return mask_fits_window(align_matrices(five_xy, self.template), self.size_px,
                                self.window(paste_window_px))

    def crops(self, frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
              five_xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, 2, 3) frame -> crop matrices and (N, S, S, 3) integer-valued BGR crops."""
        if self.template is None or self._border is None:
            raise RuntimeError("GpuFaceEnhancer is not open: call open(device) first")
        matrices = align_matrices(five_xy, self.template)
        from livecam.gpupipe.swap.warp import invert_affine

        grid = affine_grid_px(invert_affine(matrices.double()).float(), self.size_px,
                              self.size_px)
        crops = sample_bilinear_hwc(frames_bhwc_u8, frame_index, grid, border="constant",
                                    border_value=self._border)
        return matrices, crops

    def restore(self, crops_nhwc: torch.Tensor, stream: Any = None) -> torch.Tensor:
        """Restored faces (N, S, S, 3) float BGR with integer values (in chunks of the
        model's fixed batch, when it declares one)."""
        assert self._names is not None and self._weight is not None, "restore() before open()"
        image, weight, out = self._names
        blob = enhancer_input(crops_nhwc)
        step = self._batch or len(blob)
        preds = []
        for i in range(0, len(blob), step):
            feeds = {image: blob[i:i + step]}
            if weight is not None:
                feeds[weight] = self._weight
            preds.append(enhancer_faces(self.engine.run_torch(feeds, stream)[out]))
        return preds[0] if len(preds) == 1 else torch.cat(preds)

    def enhance_(self, frames_bhwc_u8: torch.Tensor, frame_index: torch.Tensor,
                 five_xy: torch.Tensor, face_valid: torch.Tensor,
                 stream: Any = None, *, hands_bhw_u8: torch.Tensor | None = None,
                 keep: KeepLoops | None = None,
                 paste_window_px: int | None = None) -> torch.Tensor:
        """Every valid face restored and blended into its frame, in place; returns frames.
        ``hands_bhw_u8``: hands kept in front, ``keep`` the streamer's eyes and mouth (see
        :func:`restore_paste_`); ``paste_window_px``: the swap's paste window (see
        :meth:`window`)."""
        matrices, crops = self.crops(frames_bhwc_u8, frame_index, five_xy)
        faces = self.restore(crops, stream)
        return restore_paste_(frames_bhwc_u8, frame_index, faces, matrices, face_valid,
                              blend=self.blend, window_px=self.window(paste_window_px),
                              hands_bhw_u8=hands_bhw_u8, keep=keep)

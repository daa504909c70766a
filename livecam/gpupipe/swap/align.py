"""Batched 5-point similarity alignment (the ArcFace templates) on tensors.

The least-squares similarity (rotation, uniform scale, translation) between two 2-D point sets
has a closed form: with centred points as complex numbers ``s`` and ``d``, the best linear part
is ``z = sum(conj(s) d) / sum(|s|^2)``. That is exactly the optimum Umeyama's SVD solution finds
(``livecam.swap.align.estimate_similarity``, scikit-image's ``SimilarityTransform``) whenever
the source points are not all collinear, and it needs no SVD: a handful of elementwise ops,
batched, capturable in CUDA graphs. Any thread that owns the tensors.
"""

from __future__ import annotations

import torch

from livecam.analysis.landmarks import (
    EYE_IMAGE_LEFT,
    EYE_IMAGE_RIGHT,
    MOUTH_IMAGE_LEFT,
    MOUTH_IMAGE_RIGHT,
    NOSE_TIP,
)
from livecam.swap.align import template_for_size, template_xy


def similarity_lstsq(src_xy: torch.Tensor, dst_xy: torch.Tensor) -> torch.Tensor:
    """(N, 2, 3) float32 similarity mapping ``src_xy`` (N, K, 2) onto ``dst_xy`` (K, 2) or
    (N, K, 2), least squares. Computed in float32 on centred points (sub-1e-4 px at 1080p)."""
    src = src_xy.float()
    dst = dst_xy.float()
    if dst.dim() == 2:
        dst = dst[None].expand_as(src)
    src_mean = src.mean(dim=1, keepdim=True)
    dst_mean = dst.mean(dim=1, keepdim=True)
    s = src - src_mean
    d = dst - dst_mean
    var = (s * s).sum(dim=(1, 2)).clamp(min=1e-12)
    a = (s[..., 0] * d[..., 0] + s[..., 1] * d[..., 1]).sum(dim=1) / var
    b = (s[..., 0] * d[..., 1] - s[..., 1] * d[..., 0]).sum(dim=1) / var
    lin = torch.stack((torch.stack((a, -b), dim=-1), torch.stack((b, a), dim=-1)), dim=-2)
    shift = dst_mean[:, 0] - torch.einsum("nij,nj->ni", lin, src_mean[:, 0])
    return torch.cat((lin, shift[..., None]), dim=-1)


def template_tensor(size_px: int, name: str | None = None, *,
                    device: torch.device | str = "cpu") -> torch.Tensor:
    """The (5, 2) float32 ArcFace template for a ``size_px`` crop (insightface's choice of
    template by size when ``name`` is None), on ``device``."""
    xy = template_xy(name or template_for_size(size_px), size_px)
    return torch.from_numpy(xy).to(device)


def align_matrices(five_xy: torch.Tensor, template_5x2: torch.Tensor) -> torch.Tensor:
    """(N, 2, 3) matrices taking frame px to crop px for keypoints ``five_xy`` (N, 5, 2)."""
    return similarity_lstsq(five_xy, template_5x2)


class FivePointFromMesh(torch.nn.Module):
    """(N, 468|478, 2+) mesh landmarks -> (N, 5, 2) float32 ArcFace-order keypoints.

    The same points as :func:`livecam.analysis.landmarks.five_point` (eye centres from corners
    and lid midpoints, nose tip, mouth corners), as one gather and one mean.
    """

    def __init__(self) -> None:
        super().__init__()
        groups = [EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, (NOSE_TIP,) * 4, (MOUTH_IMAGE_LEFT,) * 4,
                  (MOUTH_IMAGE_RIGHT,) * 4]
        self.index: torch.Tensor
        self.register_buffer("index", torch.tensor(groups, dtype=torch.long).reshape(-1),
                             persistent=False)

    def forward(self, landmarks: torch.Tensor) -> torch.Tensor:
        xy = landmarks[..., 0:2].float()
        picked = xy.index_select(1, self.index).reshape(xy.shape[0], 5, 4, 2)
        return picked.mean(dim=2)

"""The GPU tile search's reading of its outputs (:meth:`GpuTileSearch.take`): every tile's valid
detections not cut by the tile's inner edge, in tile and slot order, read in one pass over all
tiles, give what reading them tile by tile gave (written out here as the reference). The
detector's outputs are set by hand in the search's host buffers: what is tested is the
reading, not the network (test_gpu_tiles.py runs the network on real photos)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from livecam.analysis.detect import cut_by_inner_edge, merge_detections, tile_crop, tiles
from livecam.gpupipe.networks.calls import MAX_DETECTIONS
from livecam.gpupipe.networks.tiles import SLOTS_PER_TILE, GpuTileSearch, _Batch

W, H = 1920, 1080


def _layout(rng: np.random.Generator,
            dtype: torch.dtype) -> tuple[_Batch, tuple[torch.Tensor, ...]]:
    crops = [tile_crop(t, W, H) for t in tiles(W, H, 384)]
    layout = _Batch(crops)
    n = len(crops)
    # boxes inside their tile's middle (kept) and across its edges (some cut)
    x0 = np.array([c[0] for c in crops], np.float64)[:, None]
    y0 = np.array([c[1] for c in crops], np.float64)[:, None]
    side = rng.uniform(20, 200, (n, SLOTS_PER_TILE))
    bx, by = x0 + rng.uniform(-30, 330, side.shape), y0 + rng.uniform(-30, 330, side.shape)
    boxes = np.stack([bx, by, bx + side, by + side], -1)
    points = rng.uniform(0, 1000, (n, SLOTS_PER_TILE, 6, 2))
    host = (torch.from_numpy(boxes).to(dtype), torch.from_numpy(points).to(dtype),
            torch.from_numpy(rng.random((n, SLOTS_PER_TILE))).to(dtype),
            torch.from_numpy(rng.random((n, SLOTS_PER_TILE)) < 0.15))
    return layout, host


def _reference(layout: _Batch, host: tuple[torch.Tensor, ...]) -> tuple:
    boxes, points, scores, valid = (t.float().numpy() if t.dtype == torch.float16
                                    else t.numpy() for t in host)
    found = []
    for t, crop in enumerate(layout.crops_xyxy):
        for j in np.flatnonzero(valid[t]):
            if not cut_by_inner_edge(boxes[t, j], crop, W, H):
                found.append((boxes[t, j].astype(np.float32), float(scores[t, j]),
                              points[t, j].astype(np.float32)))
    return merge_detections(found, MAX_DETECTIONS), found


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_take_reads_every_tile_as_one_tile_at_a_time_did(dtype: torch.dtype) -> None:
    layout, host = _layout(np.random.default_rng(8), dtype)
    want, found = _reference(layout, host)
    assert len(found) >= 10 and len(want) >= 3  # detections kept, and some merged away
    search = GpuTileSearch.__new__(GpuTileSearch)  # no model: its outputs are set above
    search._done = None
    search._hosts = {(H, W): host}
    search._pending = (layout, H, W, [])
    got = search.take()
    assert got is not None
    for name in ("boxes_xyxy", "scores", "keypoints_xy", "track_ids"):
        assert getattr(got.faces, name).tobytes() == getattr(want, name).tobytes()
    assert got.searched_xyxy.tobytes() == np.array(layout.crops_xyxy,
                                                   np.float32).reshape(-1, 4).tobytes()
    assert not got.searched_xyxy.flags.writeable  # shared by every search of the size

"""SSD anchors as MediaPipe's ``SsdAnchorsCalculator`` builds them for BlazeFace.

Options come from mediapipe's ``face_detection_short_range.pbtxt`` / ``..._full_range.pbtxt``
(``face_detection.pbtxt`` holds the shared part: min_scale 0.1484375, max_scale 0.75, offsets
0.5, aspect ratio 1.0, fixed anchor size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SsdAnchorOptions:
    """The subset of ``SsdAnchorsCalculatorOptions`` that BlazeFace sets."""

    input_size_px: int
    strides: tuple[int, ...]
    min_scale: float = 0.1484375
    max_scale: float = 0.75
    anchor_offset: float = 0.5
    aspect_ratios: tuple[float, ...] = (1.0,)
    interpolated_scale_aspect_ratio: float = 1.0
    fixed_anchor_size: bool = True


SHORT_RANGE_ANCHORS = SsdAnchorOptions(input_size_px=128, strides=(8, 16, 16, 16))
FULL_RANGE_ANCHORS = SsdAnchorOptions(input_size_px=192, strides=(4,),
                                      interpolated_scale_aspect_ratio=0.0)


def _scale(options: SsdAnchorOptions, layer: int) -> float:
    n = len(options.strides)
    if n == 1:
        return (options.min_scale + options.max_scale) / 2.0
    return options.min_scale + (options.max_scale - options.min_scale) * layer / (n - 1.0)


def ssd_anchor_cells(options: SsdAnchorOptions) -> np.ndarray:
    """Anchors as (N, 3) int32 ``(cell_x, cell_y, grid_size)``: the centre of anchor i is
    ``(cell + offset) / grid_size``. Exact integers survive a module's ``.half()``."""
    rows: list[tuple[int, int, int]] = []
    strides = options.strides
    layer = 0
    while layer < len(strides):
        last = layer
        per_location = 0
        while last < len(strides) and strides[last] == strides[layer]:
            per_location += len(options.aspect_ratios)
            per_location += options.interpolated_scale_aspect_ratio > 0.0
            last += 1
        fm = math.ceil(options.input_size_px / strides[layer])
        rows.extend((x, y, fm) for y in range(fm) for x in range(fm) for _ in range(per_location))
        layer = last
    return np.asarray(rows, dtype=np.int32)


def ssd_anchors(options: SsdAnchorOptions) -> np.ndarray:
    """Anchors as a (N, 4) float32 array of normalised ``(x_center, y_center, width, height)``.

    Layers that share a stride are merged into one feature map, as MediaPipe does, so the
    order matches the model's output rows (896 short range, 2304 full range).
    """
    rows: list[tuple[float, float, float, float]] = []
    strides = options.strides
    layer = 0
    while layer < len(strides):
        sizes: list[tuple[float, float]] = []  # (width, height) per anchor at one location
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            scale = _scale(options, last)
            for ratio in options.aspect_ratios:
                root = math.sqrt(ratio)
                sizes.append((scale * root, scale / root))
            if options.interpolated_scale_aspect_ratio > 0.0:
                nxt = 1.0 if last == len(strides) - 1 else _scale(options, last + 1)
                interp = math.sqrt(scale * nxt)
                root = math.sqrt(options.interpolated_scale_aspect_ratio)
                sizes.append((interp * root, interp / root))
            last += 1
        fm = math.ceil(options.input_size_px / strides[layer])
        for y in range(fm):
            for x in range(fm):
                for width, height in sizes:
                    rows.append(((x + options.anchor_offset) / fm, (y + options.anchor_offset) / fm,
                                 1.0 if options.fixed_anchor_size else width,
                                 1.0 if options.fixed_anchor_size else height))
        layer = last
    return np.asarray(rows, dtype=np.float32)
